"""The two instruments on real reports: does the output name the cause and the fix?

Each case rebuilds one cited report's situation minimally (the reporter's objects, state and loop,
with stand-ins named where a library does not install here), runs the instrument as the reader
would (the lines pasted before ``backward()``, or after it for ``why_no_grad``), and checks the
printed report: ``cause`` are the words that name what the report's thread found, ``fix`` those
that name its fix. A case is *solved* when the output holds both, *partial* when it holds the
cause only (or names the rule among others without singling it out), *missed* otherwise.

    .nox/docs/bin/python measure/instrument_cases.py        # prints each case and N of M
    .nox/tests/bin/python -m pytest tests/test_instruments.py -k cases   # the recorded outcomes

``RECORDED`` holds the outcome of each case as last measured; the test fails when a case's
outcome changes either way, so the figure in the report stays the measured one.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
import find_old_graph as fog  # noqa: E402
from find_old_graph import find_old_graph  # noqa: E402
from why_no_grad import why_no_grad  # noqa: E402

CASES = []


@dataclass(frozen=True)
class Case:
    instrument: str
    url: str
    what: str  # the situation, in the reporter's words
    run: object  # () -> the report text the reader sees
    cause: tuple[str, ...]
    fix: tuple[str, ...]


def case(instrument, url, what, cause, fix):
    def register(run):
        CASES.append(Case(instrument, url, what, run, tuple(cause), tuple(fix)))
        return run

    return register


def until_reported(loss_of, opt, steps=4, mark=False, **named):
    """The reader's loop with the three lines (``mark``: ``mark_step()`` first): the step's loss,
    the report (returned once it is not empty: the step that would fail, else None), then
    zero_grad, backward and the optimizer's step. tests/test_instruments.py uses it too."""
    for i in range(steps):
        if mark:
            fog.mark_step()
        loss = loss_of(i)
        report = find_old_graph(loss, **named, opt=opt)
        if report:
            return report
        opt.zero_grad()
        loss.backward()
        opt.step()
    return None


def train_until_reported(loss_of, opt, **named):
    """``until_reported``'s report as text, as ``first_failing_step`` gives it."""
    report = until_reported(loss_of, opt, **named)
    return "(nothing reported)" if report is None else str(report)


def fails(report):
    """The report, if this loss enters a part an earlier backward freed (its backward would fail)."""
    return report if any(f.how == "freed" for f in report.freed) else None


def first_failing_step(step, steps=4):
    """Run ``step(i)`` until its report is not empty (the step that would fail); its text."""
    for i in range(steps):
        report = step(i)
        if report is not None:
            return str(report)
    return "(nothing reported)"


# ---- Where is the old graph? -------------------------------------------------------------------


@case(
    "find_old_graph",
    "https://github.com/synsense/sinabs/issues/5",
    "reset_states() zeroes the layer's state buffers in place; the second backward fails",
    cause=["reset in place (zero_())", "net.v_mem"],
    fix=["torch.zeros_like", "detach"],
)
def sinabs_reset_in_place():
    class StatefulLayer(nn.Module):  # sinabs' StatefulLayer before ffae161, reduced
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("v_mem", torch.zeros(4))

        def reset_states(self):
            for buffer in self.buffers():
                buffer.zero_()

        def forward(self, x):
            self.v_mem = self.v_mem * 0.9 + self.lin(x)
            return self.v_mem

    net = StatefulLayer()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def loss_of(i):
        net.reset_states()
        return net(torch.randn(4)).pow(2).sum()

    return train_until_reported(loss_of, opt, net=net)


@case(
    "find_old_graph",
    "https://github.com/benedekrozemberczki/pytorch_geometric_temporal/issues/305",
    "the EvolveGCN-O example fails at loss.backward() in the second epoch",
    cause=["model.recurrent.weight", "rebuilt this step from its value of an earlier step"],
    fix=["model.recurrent.weight = model.recurrent.weight.detach()"],
)
def evolvegcn_weight_state():
    class EvolveGCNO(nn.Module):  # the library's EvolveGCNO: a GRU evolves self.weight per call
        def __init__(self, n):
            super().__init__()
            self.initial_weight = nn.Parameter(torch.randn(1, n, n) * 0.3)
            self.weight = None
            self.recurrent_layer = nn.GRU(n, n)

        def forward(self, x, adjacency):
            start = self.initial_weight if self.weight is None else self.weight
            _, self.weight = self.recurrent_layer(start, start)
            return adjacency @ (x @ self.weight.squeeze(0))  # GCNConv_Fixed_W, dense

    class RecurrentGCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.recurrent = EvolveGCNO(4)
            self.linear = nn.Linear(4, 1)

        def forward(self, x, adjacency):
            return self.linear(F.relu(self.recurrent(x, adjacency)))

    torch.manual_seed(0)
    snapshots = [(torch.randn(5, 4), torch.rand(5, 5), torch.randn(5, 1)) for _ in range(3)]
    model = RecurrentGCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    return train_until_reported(
        lambda i: sum(torch.mean((model(x, a) - y) ** 2) for x, a, y in snapshots) / len(snapshots),
        optimizer,
        model=model,
    )


@case(
    "find_old_graph",
    "https://github.com/OpenNMT/OpenNMT-py/issues/403",
    "truncated BPTT: the decoder state object's hidden and input_feed carried between chunks",
    cause=["state.hidden", "state.input_feed", "rebuilt this step"],
    fix=["detach() at each step's or window's start"],
)
def opennmt_decoder_state():
    class DecoderState:  # onmt's RNNDecoderState: hidden and input_feed kept between chunks
        def __init__(self, hidden, input_feed):
            self.hidden, self.input_feed = hidden, input_feed

    torch.manual_seed(0)
    cell = nn.GRUCell(8, 4)
    out = nn.Linear(4, 4)
    opt = torch.optim.SGD([*cell.parameters(), *out.parameters()], lr=0.1)
    state = DecoderState((torch.zeros(1, 4),), torch.zeros(1, 4))
    target = torch.randn(12, 1, 4)

    def chunk(i):
        loss = 0
        for y in target[4 * i : 4 * i + 4]:
            h = cell(torch.cat([y, state.input_feed], 1), state.hidden[0])
            state.hidden, state.input_feed = (h,), out(h)
            loss = loss + (state.input_feed - y).pow(2).mean()
        report = find_old_graph(loss, state=state, cell=cell, out=out, opt=opt)
        if report:
            return report
        opt.zero_grad()
        loss.backward()
        opt.step()

    return first_failing_step(chunk, 3)


@case(
    "find_old_graph",
    "https://github.com/pyg-team/pytorch-frame/pull/229",
    "texts pre-encoded once by an embedder that is not part of the network; rtb training fails "
    "at the second iteration",
    cause=["tensor_frame.feat_dict['text']", "which none of the objects given trains"],
    fix=["detach()"],
)
def pytorch_frame_text_embedder():
    class HashTextEmbedder:  # torch_frame.testing.text_embedder before the fix
        def __init__(self, out_channels, num_hash_bins=16):
            self.embedding = nn.Embedding(num_hash_bins, out_channels)
            self.num_hash_bins = num_hash_bins

        def __call__(self, sentences):
            idx = torch.tensor([sum(map(ord, s)) % self.num_hash_bins for s in sentences])
            return self.embedding(idx)  # the fix appends .detach()

    class TensorFrame:  # materialised features, encoded once
        def __init__(self, feat_dict):
            self.feat_dict = feat_dict

    torch.manual_seed(0)
    tensor_frame = TensorFrame({"text": HashTextEmbedder(4)(["a b", "c d", "e f"])})
    model = nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters())

    return train_until_reported(
        lambda i: model(tensor_frame.feat_dict["text"]).pow(2).mean(),
        opt,
        model=model,
        tensor_frame=tensor_frame,
    )


@case(
    "find_old_graph",
    "https://github.com/sgadgil6/cnslab_fmri/issues/4",
    "run_training_lstm.py: an LSTM module keeps (h, c) in self.hidden from the last batch",
    cause=["model.hidden", "rebuilt this step"],
    fix=["model.hidden = tuple(x.detach() for x in model.hidden)"],
)
def fmri_lstm_hidden():
    class fMRI_LSTM(nn.Module):  # the report's module, smaller
        def __init__(self, hidden_dim, input_dim):
            super().__init__()
            self.lstm = nn.LSTM(input_dim, hidden_dim, batch_first=True)
            self.linear = nn.Linear(hidden_dim, 1)
            self.hidden = (torch.randn(1, 2, hidden_dim), torch.randn(1, 2, hidden_dim))

        def forward(self, x):
            lstm_out, self.hidden = self.lstm(x, self.hidden)
            return self.linear(lstm_out[:, -1, :])

    torch.manual_seed(0)
    model = fMRI_LSTM(4, 3)
    opt = torch.optim.Adam(model.parameters())

    return train_until_reported(
        lambda i: (model(torch.randn(2, 5, 3)) - 1).pow(2).mean(), opt, model=model
    )


@case(
    "find_old_graph",
    "https://github.com/mlech26l/ncps/issues/62",
    "the hidden state hx returned by the CfC model is sent into the next batch",
    cause=["hx", "rebuilt this step"],
    fix=["hx = hx.detach()"],
)
def ncps_hx():
    torch.manual_seed(0)
    model = nn.GRU(3, 4, batch_first=True)  # stands in for ncps' CfC: out, hx = model(x, hx)
    head = nn.Linear(4, 1)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()])
    state = {"hx": None}

    def step(i):
        output, state["hx"] = model(torch.randn(2, 6, 3), state["hx"])
        loss = head(output).pow(2).mean()
        hx = state["hx"]  # the reader's own variable, passed by name
        report = find_old_graph(loss, hx=hx, model=model, opt=opt)
        if report:
            return report
        opt.zero_grad()
        loss.backward()
        opt.step()

    return first_failing_step(step)


@case(
    "find_old_graph",
    "https://github.com/fangwei123456/spikingjelly/issues/420",
    "spiking neurons break backward; the reporter had forgotten functional.reset_net(s_model)",
    cause=["s_model.lif.v", "rebuilt this step"],
    fix=["between independent batches, reset it as a new tensor"],
)
def spikingjelly_reset_net():
    class LIFNode(nn.Module):  # a neuron that keeps its membrane potential v between calls
        def __init__(self):
            super().__init__()
            self.v = 0.0

        def forward(self, x):
            self.v = self.v * 0.5 + x
            spike = torch.sigmoid(4 * (self.v - 1))  # a surrogate spike
            self.v = self.v * (1 - spike)
            return spike

    class SNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.lif = nn.Linear(3, 3), LIFNode()

        def forward(self, x):
            return sum(self.lif(self.fc(x)) for _ in range(4))  # 4 time steps

    torch.manual_seed(0)
    s_model = SNN()
    opt = torch.optim.Adam(s_model.parameters())

    return train_until_reported(  # no functional.reset_net(s_model) between the steps
        lambda i: (s_model(torch.randn(2, 3)) - 1).pow(2).mean(), opt, s_model=s_model
    )


@case(
    "find_old_graph",
    "https://github.com/Lightning-AI/pytorch-lightning/issues/4098",
    "memory leak: a differentiable Dice metric with list states keeps every batch's graph",
    cause=["tensors of earlier steps kept in dice.preds"],
    fix=["detached copies"],
)
def lightning_metric_list_state():
    class DifferentiableDice:  # a 2020 Metric: update() appends to list states, nothing detached
        def __init__(self):
            self.preds, self.target = [], []

        def __call__(self, preds, target):
            self.preds.append(preds)
            self.target.append(target)
            p, t = torch.cat(self.preds), torch.cat(self.target)
            return 1 - 2 * (p * t).sum() / (p.sum() + t.sum())

    torch.manual_seed(0)
    module = nn.Linear(3, 1)
    dice = DifferentiableDice()
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    texts = []
    for _ in range(3):  # training_step: the metric is called, the loss is returned
        y_hat = torch.sigmoid(module(torch.randn(4, 3)))
        dice(y_hat, torch.ones(4, 1))
        loss = (y_hat - 1).pow(2).mean()
        texts.append(str(find_old_graph(loss, module=module, opt=opt, dice=dice)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return texts[-1]


@case(
    "find_old_graph",
    "https://github.com/chxy95/Deep-Mutual-Learning/issues/5",
    "mutual learning: the second network's loss uses the first network's output after its backward",
    cause=["out1", "freed by an earlier backward pass"],
    fix=["out1 = out1.detach()"],
)
def deep_mutual_learning():
    torch.manual_seed(0)
    net1, net2 = nn.Linear(3, 4), nn.Linear(3, 4)
    opt1 = torch.optim.SGD(net1.parameters(), lr=0.1)
    opt2 = torch.optim.SGD(net2.parameters(), lr=0.1)
    x, y = torch.randn(5, 3), torch.randint(0, 4, (5,))
    out1, out2 = net1(x), net2(x)
    kl = lambda a, b: F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction="batchmean")  # noqa: E731
    loss1 = F.cross_entropy(out1, y) + kl(out1, out2)
    loss1.backward()
    opt1.step()
    loss2 = F.cross_entropy(out2, y) + kl(out2, out1)
    return str(find_old_graph(loss2, out1=out1, out2=out2, net2=net2, opt2=opt2))


@case(
    "find_old_graph",
    "https://github.com/meta-llama/llama-cookbook/issues/247",
    "fine-tuning: Attention keeps cache_k and cache_v, written by index in forward",
    cause=["model.attention.cache_k", "written in place"],
    fix=["model.attention.cache_k = model.attention.cache_k.detach()"],
)
def llama_kv_cache():
    class Attention(nn.Module):  # llama's model.py Attention, reduced to the cache writes
        def __init__(self):
            super().__init__()
            self.wk, self.wv, self.wq = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
            self.cache_k = torch.zeros(1, 8, 4)
            self.cache_v = torch.zeros(1, 8, 4)

        def forward(self, x, start_pos=0):
            bsz, seqlen, _ = x.shape
            self.cache_k = self.cache_k.to(x)
            self.cache_v = self.cache_v.to(x)
            self.cache_k[:bsz, start_pos : start_pos + seqlen] = self.wk(x)
            self.cache_v[:bsz, start_pos : start_pos + seqlen] = self.wv(x)
            keys = self.cache_k[:bsz, : start_pos + seqlen]
            scores = (self.wq(x) @ keys.transpose(1, 2)).softmax(-1)
            return scores @ self.cache_v[:bsz, : start_pos + seqlen]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()

        def forward(self, x):
            return self.attention(x)

    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.AdamW(model.parameters())

    return train_until_reported(
        lambda i: model(torch.randn(1, 8, 4)).pow(2).mean(), opt, model=model
    )


@case(
    "find_old_graph",
    "https://discuss.pytorch.org/t/backpropagation-graph-is-reused-while-it-shouldnt/24554",
    "y = t @ a computed once before the loop, reused in every iteration",
    cause=["y:", "freed by an earlier backward pass", "recompute"],
    fix=["compute it inside the step"],
)
def forum_y_before_loop():
    measure = nn.MSELoss()
    x = torch.tensor([1, 0], dtype=torch.float64)
    t = torch.eye(2, dtype=torch.float64, requires_grad=True)
    a = torch.ones(2, dtype=torch.float64, requires_grad=True)
    y = t @ a

    def step(i):
        x_out = t @ (x + y)
        loss = measure(x_out, x)
        report = find_old_graph(loss, x=x, t=t, a=a, y=y)
        if report:
            return report
        loss.backward()

    return first_failing_step(step)


@case(
    "find_old_graph",
    "https://github.com/jlamprou/Infini-Attention/issues/3",
    "segment-wise training: the compressive memory M and z of earlier segments",
    cause=["model.M", "model.z", "rebuilt this step"],
    fix=["detach() at each step's or window's start"],
)
def infini_attention_memory():
    class InfiniAttention(nn.Module):  # the memory update of the report, reduced
        def __init__(self):
            super().__init__()
            self.k, self.v, self.q = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
            self.M, self.z = torch.zeros(4, 4), torch.zeros(4)

        def forward(self, x):
            sigma_k = F.elu(self.k(x)) + 1
            sigma_q = F.elu(self.q(x)) + 1
            out = (sigma_q @ self.M) / (sigma_q @ self.z + 1e-6).unsqueeze(-1)
            self.M = self.M + sigma_k.T @ self.v(x)  # _update_memory, without detach
            self.z = self.z + sigma_k.sum(0)
            return out

    torch.manual_seed(0)
    model = InfiniAttention()
    opt = torch.optim.AdamW(model.parameters())

    def segment(i):
        loss = model(torch.randn(6, 4)).pow(2).mean()
        report = find_old_graph(loss, model=model, opt=opt)
        if report:
            return report
        opt.zero_grad()
        loss.backward()
        opt.step()

    return first_failing_step(segment)


@case(
    "find_old_graph",
    "https://github.com/pyro-ppl/pyro/pull/2283",
    "a Transform with cache_size=1 hands back last step's output: the second grad fails",
    cause=["t._cached_x_y[1]", "this loss itself"],
    fix=["cache_size=0", "t._cached_x_y = (None, None)"],
)
def pyro_transform_cache():
    from torch.distributions.transforms import ExpTransform  # pyro's Transform is torch's

    x, t = torch.tensor(2.0, requires_grad=True), ExpTransform(cache_size=1)

    def step(i):
        fog.mark_step()
        y = t(x)
        report = find_old_graph(y, x=x, t=t, y=y)
        if report:
            return report
        torch.autograd.grad(y, x)

    return first_failing_step(step)


@case(
    "find_old_graph",
    "https://github.com/zhangyu2234/Deep-learning-by-hand",
    "labels Y = X @ true_W + true_b made once from requires_grad tensors; a hand-written sgd",
    cause=["Y:", "-> detach", "no optimizer holds them"],
    fix=["Y = Y.detach()"],
)
def synthetic_labels():
    torch.manual_seed(0)
    X = torch.randn(40, 2)
    true_W, true_b = torch.randn(2, 1, requires_grad=True), torch.randn(1, requires_grad=True)
    Y = X @ true_W + true_b
    W, b = torch.zeros(2, 1, requires_grad=True), torch.zeros(1, requires_grad=True)

    def step(i):
        fog.mark_step()
        loss = (X[10 * i : 10 * i + 10] @ W + b - Y[10 * i : 10 * i + 10]).pow(2).sum()
        report = find_old_graph(loss, X=X, true_W=true_W, true_b=true_b, Y=Y, W=W, b=b)
        if fails(report):
            return report
        loss.backward()
        with torch.no_grad():  # the report's sgd()
            for p in (W, b):
                p -= 0.01 * p.grad
                p.grad.zero_()

    return first_failing_step(step)


@case(
    "find_old_graph",
    "https://github.com/zsh523/3rgs/issues/5",
    "pose_adjust's output written back onto the Camera objects, taken in turn from a list",
    cause=["viewpoint_cam.world_view_transform", "rebuilt this step", "state"],
    fix=["keep the start"],
)
def camera_pose_adjust():
    class Camera:  # 3rgs' Camera, reduced to the pose it overwrites
        def __init__(self, i):
            self.uid, self.world_view_transform = i, torch.eye(4) + 0.01 * i

    torch.manual_seed(0)
    cams, pose_adjust = [Camera(i) for i in range(3)], nn.Linear(4, 4)
    opt = torch.optim.Adam(pose_adjust.parameters(), lr=1e-3)
    stack = []

    def step(i):
        fog.mark_step()
        if not stack:
            stack.extend(cams)
        viewpoint_cam = stack.pop(0)
        c2w = viewpoint_cam.world_view_transform.inverse()
        viewpoint_cam.world_view_transform = pose_adjust(c2w).inverse()
        loss = viewpoint_cam.world_view_transform.abs().mean()
        named = dict(cams=cams, stack=stack, viewpoint_cam=viewpoint_cam, pose_adjust=pose_adjust)
        report = find_old_graph(loss, **named, opt=opt)
        if fails(report):
            return report
        loss.backward()
        opt.step()
        opt.zero_grad()

    return first_failing_step(step)


# ---- Why is this .grad None (or zero)? ---------------------------------------------------------


def backward_then(loss, **named):
    loss.backward()
    return str(why_no_grad(loss, **named))


@case(
    "why_no_grad",
    "https://github.com/pytorch/pytorch/issues/7335",
    "no gradients for torch.tensor(np.array(...), requires_grad=True).cuda()",
    cause=["not a leaf: a copy", "made by .to(), .cuda()"],
    fix=["requires_grad=True", ".requires_grad_()"],
)
def cuda_copy():
    import numpy as np

    # .double() stands in for .cuda() (no GPU here): both make a ToCopyBackward0 copy
    a = torch.tensor(np.array([1.0, 2.0, 3.0]), dtype=torch.float, requires_grad=True).double()
    b = torch.ones(3, dtype=torch.double)
    return backward_then(a @ b, a=a)


@case(
    "why_no_grad",
    "https://github.com/open-mmlab/mmdetection/issues/11234",
    "params.grad printed as None after optim_wrapper.update_params(parsed_losses)",
    cause=["cleared", "zero_grad()"],
    fix=["before zero_grad()"],
)
def mmengine_update_params():
    class OptimWrapper:  # mmengine's OptimWrapper.update_params: backward, step, zero_grad
        def __init__(self, optimizer):
            self.optimizer = optimizer

        def update_params(self, loss):
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()

    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    optim_wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    parsed_losses = model(torch.randn(4, 3)).pow(2).mean()
    optim_wrapper.update_params(parsed_losses)
    return str(why_no_grad(parsed_losses, model=model))


@case(
    "why_no_grad",
    "https://github.com/pytorch/pytorch/issues/86051",
    "the parameter's gradient is None inside register_full_backward_hook, set outside it",
    cause=["read during backward", "AccumulateGrad"],
    fix=["after backward() returns", "register_post_accumulate_grad_hook"],
)
def full_backward_hook():
    texts = []

    def bp_hook(module, grad_input, grad_output):
        texts.append(str(why_no_grad(None, net=module)))

    net = nn.Linear(4, 1, bias=False)
    net.register_full_backward_hook(bp_hook)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", UserWarning
        )  # "firing ... since no inputs require gradients"
        net(torch.ones(1, 4)).backward()
    return texts[0]


@case(
    "why_no_grad",
    "https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6",
    "losses gathered with torch.tensor([...], requires_grad=True): PSNR does not change",
    cause=["a new leaf made from values"],
    fix=["torch.stack(losses).sum()"],
)
def losses_in_torch_tensor():
    torch.manual_seed(0)
    model = nn.Conv2d(1, 1, 3, padding=1)
    target = torch.randn(1, 1, 4, 4)
    restored = [model(torch.randn(1, 1, 4, 4)) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "To copy construct from a tensor ..."
        loss = torch.tensor([F.l1_loss(r, target) for r in restored], requires_grad=True).sum()
    return backward_then(loss, model=model)


@case(
    "why_no_grad",
    "https://github.com/mlfoundations/open_clip/issues/573",
    "'None of the inputs have requires_grad=True' with gradient checkpointing; "
    "use_reentrant=False fixed it",
    cause=["reentrant checkpoint"],
    fix=["use_reentrant=False"],
)
def reentrant_checkpoint():
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    embed = nn.Embedding(10, 4).requires_grad_(False)  # locked: the blocks' input needs no grad
    block, head = nn.Linear(4, 4), nn.Linear(4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the warning the report quotes
        x = checkpoint(block, embed(torch.tensor([1, 2, 3])), use_reentrant=True)
    return backward_then(head(x).pow(2).mean(), block=block, head=head)


@case(
    "why_no_grad",
    "https://github.com/openvinotoolkit/nncf/pull/327",
    "range init replaced a quantizer's parameter after the optimizer got the parameters",
    cause=["replaced", "after the optimizer was made"],
    fix=["copy_(new)"],
)
def nncf_parameter_replaced():
    class SymmetricQuantizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1))

        def forward(self, x):
            return torch.round(x / self.scale).detach() * self.scale + (x - x.detach())

    torch.manual_seed(0)
    quantizer = SymmetricQuantizer()
    optimizer = torch.optim.SGD(quantizer.parameters(), lr=0.1)
    x = torch.randn(8)
    quantizer.scale = nn.Parameter(x.abs().max().reshape(1))  # range init, before the fix
    return backward_then((quantizer(x) - x).pow(2).sum(), model=quantizer, opt=optimizer)


@case(
    "why_no_grad",
    "https://github.com/lucidrains/deep-cross-attention/issues/2",
    "zero initialisation with ReLU: no gradient, the optimizer never moves off zero",
    cause=["dead ReLU"],
    fix=["initialisation"],
)
def zero_init_relu():
    torch.manual_seed(0)
    linear = nn.Linear(4, 3, bias=False)
    nn.init.zeros_(linear.weight)
    to_aggregate = nn.Sequential(nn.LayerNorm(4), linear, nn.ReLU())
    out = to_aggregate(torch.randn(2, 4)).sum()
    return backward_then(out, linear=linear)


@case(
    "why_no_grad",
    "https://github.com/pytorch/pytorch/issues/58511",
    "a custom autograd.Function gives a zero gradient, not None, to a parameter the loss does not use",
    cause=["custom autograd.Function", "zero"],
    fix=["set_materialize_grads(False)"],
)
def custom_function_zeros():
    class PassThrough(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            return inputs

        @staticmethod
        def backward(ctx, *grad_outputs):
            return grad_outputs

    class MyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(1, 1, bias=False)
            self.b = nn.Linear(1, 1, bias=False)

        def forward(self, x):
            return PassThrough.apply(self.a(x), self.b(x))

    model = MyModel()
    out = model(torch.ones(1))
    return backward_then(out[0].sum(), model=model)


@case(
    "why_no_grad",
    "https://github.com/tloen/alpaca-lora/issues/352",
    "LoRA weights loaded with PeftModel.from_pretrained: trainable params: 0",
    cause=["frozen", "requires_grad is False"],
    fix=["to train it, requires_grad_()"],
)
def lora_loaded_frozen():
    class LoraLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = nn.Linear(4, 4)
            self.lora_A, self.lora_B = nn.Linear(4, 2, bias=False), nn.Linear(2, 4, bias=False)

        def forward(self, x):
            return self.base(x) + self.lora_B(self.lora_A(x))

    torch.manual_seed(0)
    model = LoraLinear().requires_grad_(False)  # from_pretrained without is_trainable=True
    x = torch.randn(3, 4, requires_grad=True)  # inputs that need grad keep a graph
    return backward_then(model(x).pow(2).mean(), lora_A=model.lora_A, lora_B=model.lora_B)


@case(
    "why_no_grad",
    "https://github.com/nianticlabs/monodepth2/issues/24",
    "'element 0 of tensors does not require grad and does not have a grad_fn' after changes "
    "around with torch.no_grad()",
    cause=["torch.no_grad()"],
    fix=["gradients enabled"],
)
def monodepth_no_grad():
    model = nn.Conv2d(3, 1, 3)
    with torch.no_grad():
        loss = model(torch.randn(1, 3, 8, 8)).abs().mean()
    return str(why_no_grad(loss, model=model))  # a report, not an error


@case(
    "why_no_grad",
    "https://github.com/KaiyangZhou/pytorch-center-loss/issues/4",
    "param.grad is NoneType when reading param.grad.data",
    cause=["read before backward"],
    fix=["call loss.backward() first"],
)
def center_loss_before_backward():
    class CenterLoss(nn.Module):
        def __init__(self, num_classes=3, feat_dim=2):
            super().__init__()
            self.centers = nn.Parameter(torch.randn(num_classes, feat_dim))

        def forward(self, x, labels):
            return (x - self.centers[labels]).pow(2).sum(1).mean()

    torch.manual_seed(0)
    center_loss = CenterLoss()
    loss = center_loss(torch.randn(4, 2), torch.tensor([0, 1, 2, 0]))
    return str(why_no_grad(loss, center_loss=center_loss))  # where the reader read param.grad


@case(
    "why_no_grad",
    "https://github.com/kazuto1011/grad-cam-pytorch/issues/33",
    "Grad-CAM in inference: the conv's grad_fn is always None, no gradient is stored",
    cause=["torch.no_grad() or inference_mode"],
    fix=["gradients enabled"],
)
def gradcam_inference():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    with torch.inference_mode():  # the report's inference script
        score = model(torch.randn(1, 3, 8, 8))[0, 1]
    return str(why_no_grad(score, model=model))


@case(
    "why_no_grad",
    "https://github.com/rll-research/cic/issues/5",
    "the encoder gets no gradient: aug_and_encode runs under torch.no_grad() in update()",
    cause=["encoder.convnet.0.weight", "not used or is cut"],
    fix=["encoder.convnet[0].register_forward_hook", "False: it runs under torch.no_grad()"],
)
def cic_encoder_no_grad():
    torch.manual_seed(0)
    encoder = nn.Sequential()
    encoder.convnet = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.Flatten())
    cic = nn.Linear(4 * 3 * 3, 4)
    with torch.no_grad():  # the agent's update(): obs = self.aug_and_encode(obs)
        obs = encoder(torch.rand(2, 3, 7, 7))
    return backward_then(cic(obs).pow(2).mean(), encoder=encoder, cic=cic)


@case(
    "why_no_grad",
    "https://github.com/huggingface/sentence-transformers/issues/274",
    "the output of model.encode() has no gradient; loss.backward() trains nothing",
    cause=["out: .grad is None", "made without gradients"],
    fix=["call the model's forward, not the wrapper"],
)
def sentence_transformers_encode():
    class SentenceModel(nn.Sequential):  # encode(): eval, no_grad, detach, as the library's
        def encode(self, ids):
            self.eval()
            with torch.no_grad():
                return self(ids).detach()

    torch.manual_seed(0)
    model = SentenceModel(nn.EmbeddingBag(100, 16))
    out = model.encode(torch.tensor([[1, 2, 3]]))
    loss = (out - torch.randn(16)).pow(2).mean()
    return str(why_no_grad(loss, out=out, model=model))


@case(
    "why_no_grad",
    "https://github.com/wonbeomjang/mobile-hair-segmentation-pytorch/issues/3",
    "ImageGradientLoss takes pred.argmax(1): the loss does not require grad",
    cause=["pred has history", "the cut lies between it and the loss"],
    fix=["differentiable surrogate"],
)
def hair_seg_argmax():
    torch.manual_seed(0)
    net = nn.Conv2d(3, 2, 3, padding=1)
    pred = net(torch.rand(2, 3, 8, 8))
    mask = pred.argmax(1, keepdim=True).float()  # the loss's first line
    loss = F.conv2d(mask, torch.ones(1, 1, 3, 3), padding=1).abs().mean()
    return str(why_no_grad(loss, net=net, pred=pred))


@case(
    "why_no_grad",
    "https://github.com/KarenUllrich/pytorch-binary-converter/issues/3",
    "float2bit/bit2float between two layers: the first layer's gradient is zero",
    cause=["floor", "sign", "piecewise constant"],
    fix=["straight-through estimator"],
)
def binary_converter_steps():
    torch.manual_seed(0)
    conv, fc = nn.Linear(4, 4), nn.Linear(4 * 8, 1)

    def float2bit(f):  # the repository's idea, shortened: sign and exponent bits by floor and %
        s = (1 - torch.sign(f)) / 2
        e = torch.floor(torch.log2(f.abs()))
        bits = (f.abs() / 2**e)[..., None] * 2.0 ** torch.arange(7)
        return torch.cat([s[..., None], (bits - bits % 1) % 2], -1)

    loss = (fc(float2bit(conv(torch.randn(3, 4))).flatten(1)) - 1).pow(2).mean()
    return backward_then(loss, conv=conv, fc=fc)


@case(
    "why_no_grad",
    "https://github.com/NVlabs/diff-dope/issues/1",
    "weights 0.0 on the rgb and depth terms, a mask from renders['rgb'] > 0: zero gradients",
    cause=["every path from the loss to it passes through a multiplication by zero"],
    fix=["a non-zero weight"],
)
def diffdope_zero_weights():
    position = nn.Parameter(torch.tensor([0.1, -0.1, 1.0]))
    u = torch.linspace(-1, 1, 8)
    blob = torch.relu(0.5 - (u[:, None] - position[0]).pow(2) - (u - position[1]).pow(2))
    mask = (blob > 0).float()  # a comparison: no history
    gt = torch.rand(8, 8)
    loss = 0.0 * (blob - gt).pow(2).mean() + 0.0 * (blob * position[2]).mean()
    loss = loss + 1.0 * (mask - gt).pow(2).mean()
    return backward_then(loss, position=position)  # where the reader reads: after backward()


# ---- the count ---------------------------------------------------------------------------------

# ---- held-out trial 4 (now tuning material): the mechanisms it found ---------------------------


def _twice_in_one_step(second_call):
    """One step whose loss is backwarded by a first caller, then handed to ``second_call``."""
    from find_old_graph import mark_step

    torch.manual_seed(0)
    net = nn.Linear(4, 3)
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    mark_step()
    loss = F.cross_entropy(net(x), y)
    loss.backward()  # the first caller (the default OptimizerHook; R-Drop's criterion)
    return str(find_old_graph(second_call(loss), net=net))


@case(
    "find_old_graph",
    "https://github.com/open-mmlab/mmcv/issues/1379",
    "GradientCumulativeOptimizerHook in custom_hooks beside the default OptimizerHook",
    cause=["already backwarded in this step", "the same loss"],
    fix=["keep one backward()", "traceback.print_stack"],
)
def mmcv_two_optimizer_hooks():
    return _twice_in_one_step(
        lambda loss: loss / 4
    )  # the cumulative hook's loss / cumulative_iters


@case(
    "find_old_graph",
    "https://github.com/dropreg/R-Drop/issues/8",
    "the criterion calls optimizer.backward(loss) and the task calls it again",
    cause=["already backwarded in this step", "the same loss"],
    fix=["keep one backward()", "traceback.print_stack"],
)
def rdrop_duplicated_backward():
    return _twice_in_one_step(lambda loss: loss)


@case(
    "why_no_grad",
    "https://github.com/pytorch/pytorch/issues/31396",
    "Linear + Softmax + BCELoss on large counts: gradients == 0",
    cause=["saturated softmax"],
    fix=["BCEWithLogitsLoss"],
)
def saturated_softmax():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(50, 2), nn.Softmax(dim=-1))
    with torch.no_grad():
        model[0].weight[1] += 1.0
    inputs = torch.randint(0, 12, (50,)).float() * 10
    loss = nn.BCELoss()(model(inputs), torch.tensor([0.0, 1.0]))
    after = backward_then(loss, model=model)  # zero; the report says: call it before backward()
    opt = torch.optim.Adam(model.parameters())
    opt.zero_grad()
    loss = nn.BCELoss()(model(inputs), torch.tensor([0.0, 1.0]))
    return after + "\n" + str(why_no_grad(loss, model=model))


@case(
    "why_no_grad",
    "https://github.com/pytorch/pytorch/issues/61410",
    "torch.Tensor([p1, p2]) of parameters loses the gradients",
    cause=["not on the graph"],
    fix=["torch.stack"],
)
def tensor_of_params():
    torch.manual_seed(0)
    p1, p2, lin = nn.Parameter(torch.tensor(0.5)), nn.Parameter(torch.tensor(2.0)), nn.Linear(2, 1)
    return backward_then(lin(torch.Tensor([p1, p2])).sum(), p1=p1, p2=p2, lin=lin)


@case(
    "why_no_grad",
    "https://github.com/pytorch/pytorch/issues/12756",
    "C's weights set to w * A + (1 - w) * B through .data: A and B get no gradient",
    cause=["copied into another module"],
    fix=["functional_call"],
)
def data_assign_mix():
    torch.manual_seed(0)
    a, b, c = (nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1)) for _ in range(3))
    opt = torch.optim.SGD([*a.parameters(), *b.parameters()], lr=0.1)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        pc.data = 0.3 * pa + 0.7 * pb
    return backward_then(c(torch.randn(8, 4)).sum(), a=a, b=b, c=c, opt=opt)


@case(
    "why_no_grad",
    "https://github.com/ai2cm/ace/pull/1493",
    "reentrant checkpoint on data inputs: the encoder's parameters stay at grad=None",
    cause=["reentrant checkpoint"],
    fix=["use_reentrant=False"],
)
def ace_reentrant_encoder():
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    encoder, head = nn.Sequential(nn.Linear(4, 4)), nn.Linear(4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        loss = head(checkpoint(encoder, torch.randn(3, 4), use_reentrant=True)).sum()
    return backward_then(loss, encoder=encoder, head=head)


RECORDED = {  # the outcome of each case as last measured (tests/test_instruments.py compares)
    "sinabs_reset_in_place": "solved",
    "evolvegcn_weight_state": "solved",
    "opennmt_decoder_state": "solved",
    "pytorch_frame_text_embedder": "solved",
    "fmri_lstm_hidden": "solved",
    "ncps_hx": "solved",
    "spikingjelly_reset_net": "solved",
    "lightning_metric_list_state": "solved",
    "deep_mutual_learning": "solved",
    "llama_kv_cache": "solved",
    "forum_y_before_loop": "solved",
    "infini_attention_memory": "solved",
    "pyro_transform_cache": "solved",
    "synthetic_labels": "solved",
    "camera_pose_adjust": "solved",
    "cuda_copy": "solved",
    "mmengine_update_params": "solved",
    "full_backward_hook": "solved",
    "losses_in_torch_tensor": "solved",
    "reentrant_checkpoint": "solved",
    "nncf_parameter_replaced": "solved",
    "zero_init_relu": "partial",
    "custom_function_zeros": "solved",
    "lora_loaded_frozen": "solved",
    "monodepth_no_grad": "solved",
    "center_loss_before_backward": "solved",
    "gradcam_inference": "solved",
    "cic_encoder_no_grad": "solved",
    "sentence_transformers_encode": "solved",
    "hair_seg_argmax": "solved",
    "binary_converter_steps": "solved",
    "diffdope_zero_weights": "missed",
    "mmcv_two_optimizer_hooks": "solved",
    "rdrop_duplicated_backward": "solved",
    "saturated_softmax": "solved",
    "tensor_of_params": "solved",
    "data_assign_mix": "solved",
    "ace_reentrant_encoder": "solved",
}


def outcome(one: Case) -> tuple[str, str]:
    """('solved' | 'partial' | 'missed', the report text)."""
    fog._MARK = None  # each case starts without a step marker
    with contextlib.redirect_stdout(io.StringIO()):
        text = one.run()
    cause = all(word in text for word in one.cause)
    fix = all(word in text for word in one.fix)
    if cause and fix:
        return "solved", text
    if cause or any(word in text for word in one.cause):
        return "partial", text
    return "missed", text


def main() -> None:
    counts: dict = {}
    for one in CASES:
        result, text = outcome(one)
        counts.setdefault(one.instrument, []).append(result)
        print(f"=== {one.run.__name__} ({one.instrument}): {result}\n    {one.url}\n    {one.what}")
        print("    " + text.replace("\n", "\n    "))
    for instrument, results in counts.items():
        print(
            f"{instrument}: {results.count('solved')} of {len(results)} solved, "
            f"{results.count('partial')} partial, {results.count('missed')} missed"
        )


if __name__ == "__main__":
    main()


# ---- the lines for docs/frameworks.md (real Lightning and Accelerate, as pinned there) -----------


def frameworks() -> dict:
    """Both instruments from a Lightning callback and from an Accelerate loop, on a module that
    carries state between steps and has a frozen layer: what each printed."""
    import logging
    import os
    import tempfile

    os.environ["HF_HUB_OFFLINE"] = "1"
    warnings.filterwarnings("ignore", message="IProgress not found")
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    import lightning as L
    from accelerate import Accelerator
    from find_old_graph import mark_step

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class Tracker(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.hidden = nn.Linear(3, 3), torch.zeros(3)
            self.frozen = nn.Linear(3, 3).requires_grad_(False)

        def forward(self, x):
            self.hidden = torch.tanh(self.lin(x).mean(0) + self.hidden)
            return (self.frozen(self.hidden) + self.hidden).pow(2).mean()

    batches = torch.randn(3, 4, 3)
    printed = {"lightning": [], "accelerate": []}
    show = printed["lightning"].append  # stands in for print

    class FindTheCause(L.Callback):  # the lines for the frameworks page, print() as show()
        def on_train_batch_start(self, trainer, module, batch, i): mark_step()  # fmt: skip

        def on_before_backward(self, trainer, module, loss): show(str(find_old_graph(loss, module=module, opt=trainer.optimizers[0]))); self.loss = loss  # noqa: E702  # fmt: skip

        def on_after_backward(self, trainer, module): show(str(why_no_grad(self.__dict__.pop("loss"), module=module)))  # fmt: skip

    class Reader(L.LightningModule):
        def __init__(self, detach):
            super().__init__()
            self.net, self.detach = Tracker(), detach

        def training_step(self, x, i):
            if self.detach:
                self.net.hidden = self.net.hidden.detach()
            return self.net(x)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    for detach in (False, True):
        trainer = L.Trainer(
            max_steps=3, accelerator="cpu", logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, callbacks=[FindTheCause()],
            default_root_dir=tempfile.mkdtemp(),
        )  # fmt: skip
        with contextlib.suppress(RuntimeError):  # the freed-graph error, without the fix
            trainer.fit(Reader(detach), torch.utils.data.DataLoader(batches, batch_size=None))

    for detach in (False, True):
        net = Tracker()
        accelerator = Accelerator(cpu=True)
        model, opt = accelerator.prepare(net, torch.optim.SGD(net.lin.parameters(), lr=0.1))
        for x in batches:
            if detach:
                net.hidden = net.hidden.detach()
            mark_step(); loss = model(x); printed["accelerate"].append(str(find_old_graph(loss, model=model, opt=opt)))  # noqa: E702  # fmt: skip
            if "Carrying" in printed["accelerate"][-1]:
                break
            accelerator.backward(loss); printed["accelerate"].append(str(why_no_grad(loss, model=model)))  # noqa: E702  # fmt: skip
            opt.step()
            opt.zero_grad()
    return printed
