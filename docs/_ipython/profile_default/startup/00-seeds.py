# Every page starts from the same random state, so two builds show the same numbers.
import random

import numpy as np
import torch

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)
del random, np, torch
