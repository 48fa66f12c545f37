/*
 * The site's search ranking (conf.py: html_search_scorer; Sphinx inlines this file into
 * _static/language_data.js, which the search page loads right after searchtools.js).
 *
 * Why: Sphinx's own ranking (searchtools.js) gives a query word 15 points in any heading and 5
 * anywhere else, shows equal scores in alphabetical order of title, and lists a page only when it
 * contains every query word. Readers paste error messages that carry their own details (cuda:0,
 * [256, 10], TBackward0, "is at version 3"), which no page contains, and most pages tie on the
 * rest, so the page that explains an error came third or fourth behind pages that only use it.
 *
 * What this does instead: it replaces Search._performSearch (the function that turns a parsed
 * query into the list of results) and keeps everything else of searchtools.js (the page, the
 * query parsing, the stemmer, the result list and its summaries). Search._performSearch and
 * Search._index are private: the documented Scorer.score(result) can only rescore the pages that
 * contain every query word, and is not given the query (sphinx-doc/sphinx#13649; README.md,
 * "Private APIs", has the measurements of the documented scorer alone and of Pagefind).
 *
 *  - Words found nowhere on the site are ignored, so a pasted message still finds its page. An
 *    error's older wordings (WORDINGS), autograd node numbers (SigmoidBackward vs SigmoidBackward0),
 *    pasted tensor types and numbers (shapes, versions) are normalised away in the query and in
 *    the index alike, so one index entry finds every torch release's wording.
 *  - Each query word found on a page scores by where it is found there (page title, index
 *    entries, section headings, text), times how rare the word is on the site (idf, to the power
 *    0.65), so words every page uses ("backward", "graph") count little, and one rare word that a
 *    section happens to share with a long report does not outweigh the rest of it. Words of contractions (doesn't -> doesn,
 *    t; FILLER) count as nothing. A pasted identifier the site does not know (first_order,
 *    SpikingNeuron) counts by its parts. A Latin word of two letters (GP, DP, pl) counts only if
 *    the index holds it as an entry of its own: it stands for too many things.
 *  - Focus: a page's units are its title, each section heading, and the `{index}` entries of each
 *    section. Its focus is the unit holding most of the query (idf-weighted); in index
 *    entries and headings outside it a word counts by `elsewhere`, so a page whose long entry
 *    lists catch a query's words one by one ranks below a page with a section about them.
 *  - Phrases: an index entry, heading or title contained in the query (a pasted message contains
 *    the error text listed in the explaining page's index entries), or containing the whole query,
 *    scores by its number of words, times its share of the query's words to a small power; an
 *    entry equal to the query scores most. Several query words together in one entry, heading or
 *    title (in any order) score extra.
 *  - The reader's situation decides between the pages that treat a pasted message: entries,
 *    headings and titles of any page (two words or more) that the query contains are recognised
 *    (an error message, an API phrase); the query's other words are its situation (MAML, a WGAN
 *    critic, a spiking cell, Accelerate). A page gains, per (idf-weighted) situation word, from
 *    its one unit holding the most of them, and its link goes to the unit (section) holding most
 *    of the query, the situation counting extra. The error reference (ROUTING_PAGES) lists every
 *    situation only to route it, so there the situation does not count.
 *  - The score is scaled by the square root of the share of the query's (idf-weighted) words that
 *    the page contains. SiteSearch.explain("query") in the browser console shows the parts.
 *  - Pages that only quote errors and claims (the ledger: docs/ledger*) score half, so they come
 *    after the pages that explain them.
 *  - Reference pages (REFERENCE_PAGES: which-torch, history, how-this-site-works) score half
 *    unless the query holds one of their own words: a word of their title or top index entries
 *    that at most one other page has in a title, heading or index entry (volatile, legacy,
 *    renamed, older, nox, mutation); their other signals (retain_variables, a release) are
 *    phrases and entries that still score. Their long index lines otherwise catch a generic
 *    question's words one by one ("purpose" in "a warning is shown on purpose").
 *  - Gallery scripts (EXAMPLE_PAGES) score 0.6 unless the query names the example: at least three
 *    quarters of its (idf-weighted) words are in the script's title and opening index line. A
 *    worked example repeats its subject's words in its code and headings, so a report about MAML
 *    or a GAN step otherwise finds the script above the section that explains its case.
 *  - Each page appears once, linked to the section that matches the query best: its heading and
 *    the `{index}` lines within it count together (the build links each index entry to the
 *    section holding it; the line under the page title to the page's top). A section whose
 *    heading or entry the query contains (a pasted message) hands the link to its subsection
 *    that the query names too (a more specific message), else to the one holding most of the
 *    situation's words, if one holds any (the build lists each subsection's enclosing section:
 *    sectionparents): the message names the section, the situation the case within it. Equal scores are
 *    ordered by the share of the query found, then by the smaller page (fewer distinct words:
 *    more focused), then by page name, never by title alone.
 *
 * It needs only what searchindex.js holds (titles, headings, index entries, word lists), makes no
 * request, and works from a local server and from a site opened from disk (file://), where it
 * switches off result summaries (they would fetch each page, which browsers refuse for file://).
 * tests/test_search.py checks the ranking with the queries of tests/search_queries.toml.
 */
"use strict";

const SiteSearch = (() => {
  const WEIGHT = {
    title: 10, // query word in the page's title
    entry: 8, // in one of the page's index entries ({index} after the title)
    heading: 4, // in a section heading
    text: 1, // anywhere in the text
    exactEntry: 60, // an index entry (or title, heading) equal to the whole query
    entryWords: 4, // several query words in one index entry: per (idf-weighted) word, times the
    headingWords: 3, // share of the entry's (heading's, title's) words they make up
    titleWords: 4,
    entryPhrase: 6, // per word of an index entry found as a phrase in the query (or vice versa)
    headingPhrase: 4, // the same for a section heading
    titlePhrase: 5, // the same for the page title
    quoting: 0.5, // factor for pages that only quote what other pages explain
    share: 0.5, // exponent of the share of the query's words found on the page
    textShare: 1, // how much a word found only in the text counts in that share
    phraseShare: 0.25, // exponent of that share (a phrase found in a longer query)
    elsewhere: 0.6, // factor for a word in entries or headings outside the page's focus (rank)
    sectionWords: 2, // per (idf-weighted) query word in one section's heading or index entries
    situation: 5, // per (idf-weighted) situation word in the page's best section (rank)
    sectionSituation: 3, // the same, in choosing the section a result links to
    reference: 0.5, // factor for reference pages whose own words the query lacks
    example: 0.6, // factor for gallery scripts whose title and opening the query does not name
    namesExample: 0.75, // share of the query's (idf-weighted) words there that names the example
    idfPower: 0.65, // idf to this power: a single rare word (neuron, meta, accelerator) shared with
    // one section weighs less against the report's other words (sets 1 to 8 chose it, 2026-12-07)
    ownPages: 1, // a reference page's own word: in its title or top index entries, and in a
    // title, heading or index entry of at most this many pages that are not reference pages
  };
  // Reference pages (CONTRIBUTING.md's page map: releases, the old API, the site's method) answer
  // a query that carries their own words (a release, retain_variables, volatile, a mutation test),
  // not the generic questions their long index lines catch word by word.
  const REFERENCE_PAGES = /^docs\/(which-torch|history|how-this-site-works)$/;
  const QUOTING_PAGES = /^docs\/ledger/;
  // Pages that route each situation to the page that owns it (the error reference): they list
  // every situation's words, so the situation does not count for them.
  const ROUTING_PAGES = /^docs\/errors$/;
  // Worked examples (sphinx-gallery scripts): they show what a docs page explains.
  const EXAMPLE_PAGES = /^auto_examples\//;
  const SHORT_WORD = /^[a-z]{2}$/; // a Latin word this short counts only as an entry of its own
  const MIN_PHRASE_WORDS = 2; // a phrase match needs this many words (single words score as words)

  // Errors as older torch releases word them -> one wording. Applied to the query and to every
  // title, heading and index entry alike (to their words: lower case, numbers dropped), so that one
  // index entry finds every release's wording of a message.
  const WORDINGS = [
    // 0.1.x: "... through the graph second time, but the buffers have already been freed";
    // 0.2-1.5: "a second time, but the buffers ..."; 1.6-1.8: "..., but the saved intermediate
    // results have already been freed"; 1.9: "saved variables" where 1.10+ says "saved tensors"
    // (docs/errors.md, errors-wordings). Today's: "(or directly access saved tensors after ...)".
    [/ graph second time /g, " graph a second time "],
    [/ (?:but the )?saved intermediate results have already been freed /g, " buffers have already been freed "],
    [/ saved variables /g, " saved tensors "],
    // 0.1.x asked for retain_variables=True where 0.2+ asks for retain_graph=True
    [
      / specify retain_variables true when calling backward /g,
      " specify retain_graph true when calling backward ",
    ],
    [/ non leaf variable /g, " non leaf tensor "],
    // readers write "in-place" and "in place" where messages say "inplace"
    [/ in place /g, " inplace "],
    // a pasted tensor type: torch.cuda.FloatTensor, torch.HalfTensor -> torch tensor
    [/ torch (?:cuda )?[a-z]+tensor /g, " torch tensor "],
  ];
  // Autograd node names carry a number that changed between releases (SigmoidBackward,
  // SigmoidBackward0): they are compared without it, in the query and in the index.
  const nodeName = (stem) => stem.replace(/^([a-z_]+backward)\d+$/, "$1");
  // What is left of contractions (doesn't -> doesn, t) and other words that carry no subject,
  // besides Sphinx's stopwords: they are ignored as words (phrases keep them).
  const FILLER = new Set(
    "doesn don isn won aren wasn weren didn hasn haven couldn shouldn wouldn".split(" "),
  );
  ["t", "s", "ve", "ll", "re", "d", "m"].forEach((w) => FILLER.add(w));
  let prepared = null; // derived from the loaded index, once

  // Scripts written without spaces (Chinese, Japanese, also Korean runs) keep a pasted English
  // word inside one run (为什么在backward的时候): each of their characters stands alone here.
  const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/gu;
  const words = (text) =>
    splitQuery(text.toLowerCase().replace(CJK, " $& ")).filter((w) => w.length > 0);
  // For whole-word phrase matching: lower case, no numbers, older error wordings made today's.
  const normal = (text) =>
    WORDINGS.reduce(
      (t, [from, to]) => t.replace(from, to),
      ` ${words(text)
        .filter((w) => !/^\d+$/.test(w))
        .join(" ")} `,
    );

  const prepare = (index) => {
    const stemmer = new Stemmer();
    const stems = (text) =>
      words(normal(text))
        .filter((w) => !stopwords.has(w) && !FILLER.has(w))
        .map((w) => nodeName(stemmer.stemWord(w)));
    const docCount = index.docnames.length;
    const docs = index.docnames.map((docname, file) => ({
      file,
      docname,
      title: index.titles[file],
      titleNormal: normal(index.titles[file] || ""),
      titleStems: new Set(stems(index.titles[file] || "")),
      headings: [], // [normal text, anchor, stems]
      headingStems: new Set(),
      entries: [], // [normal text, anchor, stems]
      entryStems: new Set(),
      vocabulary: 0,
      quoting: QUOTING_PAGES.test(docname),
      routing: ROUTING_PAGES.test(docname),
      reference: REFERENCE_PAGES.test(docname),
      own: new Set(), // a reference page's own words
      example: EXAMPLE_PAGES.test(docname),
      opening: new Set(), // a gallery script's title and top index entries
    }));
    for (const [title, places] of Object.entries(index.alltitles || {})) {
      for (const [file, anchor] of places) {
        const doc = docs[file];
        if (!doc || (anchor === null && title === doc.title)) continue;
        const unit = new Set(stems(title));
        doc.headings.push([normal(title), anchor, unit]);
        unit.forEach((s) => doc.headingStems.add(s));
      }
    }
    // An index entry's anchor is the id of the section holding its `{index}` line, as the build
    // records it (docs/_ext/freshness.py), the heading's own anchor; "" for the page's top.
    for (const [entry, places] of Object.entries(index.indexentries || {})) {
      const seen = new Set();
      for (const [file, anchor] of places) {
        const doc = docs[file];
        if (!doc || seen.has(file)) continue; // an entry counts once per page (its first place)
        seen.add(file);
        const unit = new Set(stems(entry));
        doc.entries.push([normal(entry), anchor || "", unit]);
        unit.forEach((s) => doc.entryStems.add(s));
      }
    }
    for (const doc of docs) {
      if (!doc.example) continue;
      doc.titleStems.forEach((s) => doc.opening.add(s));
      for (const [, anchor, unit] of doc.entries)
        if (anchor === "") unit.forEach((s) => doc.opening.add(s));
    }
    // A reference page's own words: stems of its title and top index entries that at most
    // `ownPages` other (not reference) pages hold in a title, heading or index entry.
    const placedOn = new Map();
    for (const doc of docs)
      for (const s of new Set([...doc.titleStems, ...doc.entryStems, ...doc.headingStems])) {
        if (!placedOn.has(s)) placedOn.set(s, []);
        placedOn.get(s).push(doc);
      }
    for (const doc of docs) {
      if (!doc.reference) continue;
      const top = new Set(doc.titleStems);
      for (const [, anchor, unit] of doc.entries) if (anchor === "") unit.forEach((s) => top.add(s));
      for (const s of top)
        if (placedOn.get(s).filter((d) => !d.reference).length <= WEIGHT.ownPages)
          doc.own.add(s);
    }
    // stem -> set of files whose text (or any title) has it
    const textFiles = new Map();
    for (const mapping of [index.terms, index.titleterms]) {
      for (const [term, files] of Object.entries(mapping || {})) {
        const list = typeof files === "number" ? [files] : files;
        const key = nodeName(term);
        if (!textFiles.has(key)) textFiles.set(key, new Set());
        list.forEach((f) => textFiles.get(key).add(f));
      }
    }
    for (const files of textFiles.values()) files.forEach((f) => docs[f] && docs[f].vocabulary++);
    const inDoc = (doc, s) =>
      doc.titleStems.has(s) ||
      doc.entryStems.has(s) ||
      doc.headingStems.has(s) ||
      (textFiles.has(s) && textFiles.get(s).has(doc.file));
    const idfCache = new Map();
    const idf = (s) => {
      if (!idfCache.has(s)) {
        const df = docs.filter((doc) => inDoc(doc, s)).length;
        idfCache.set(s, df === 0 ? 0 : Math.log((docCount + 1) / df) ** WEIGHT.idfPower);
      }
      return idfCache.get(s);
    };
    // Words of two letters (GP, DP, pl, fn) stand for too many things to count as words, unless
    // the index holds one as an entry of its own (an abbreviation a page explains).
    const ownEntries = new Set();
    for (const doc of docs)
      for (const [, , unit] of doc.entries)
        if (unit.size === 1) unit.forEach((s) => ownEntries.add(s));
    const counts = (s) => idf(s) > 0 && (!SHORT_WORD.test(s) || ownEntries.has(s));
    return { docs, textFiles, idf, inDoc, stems, counts };
  };

  // Phrase score of one text (entry, heading, title) against the normalised query: the text is
  // the query, or is found in it, or contains all of it (then the closer the fit, the more).
  const phrase = (text, query, queryWords, perWord) => {
    if (text === query) return WEIGHT.exactEntry;
    const n = text.trim().split(" ").length;
    // a phrase found in a longer query counts by the share of the query it makes up, so that the
    // rest of the query (the reader's situation around a pasted message) decides between pages
    if (n >= MIN_PHRASE_WORDS && query.includes(text))
      return perWord * n * (n / queryWords) ** WEIGHT.phraseShare;
    if (queryWords >= MIN_PHRASE_WORDS && text.includes(query))
      return perWord * queryWords * (0.5 + (0.5 * queryWords) / n);
    return 0;
  };

  // Several query words together in one entry, heading or title (in any order).
  const together = (unit, known, idf, perWord) => {
    const shared = known.filter((s) => unit.has(s));
    if (shared.length < 2) return 0;
    return (perWord * shared.reduce((sum, s) => sum + idf(s), 0) * shared.length) / unit.size;
  };

  const ready = () => {
    const index = Search._index;
    if (prepared === null || prepared.index !== index) prepared = { index, ...prepare(index) };
    return prepared;
  };

  // A pasted identifier the site does not know (first_order, gradient_update_parameters,
  // SpikingNeuron, FactorVAE) counts by its parts: split at underscores and at lower-to-upper case.
  const compoundParts = (query, stems, idf) =>
    query
      .split(/[^\p{Letter}\p{Number}_]+/u)
      .filter((token) => /[_]|[a-z][A-Z]/.test(token) && stems(token).every((s) => idf(s) === 0))
      .flatMap((token) => stems(token.replace(/_/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2")));

  const rank = (query, searchTerms, excludedTerms) => {
    const { docs, textFiles, idf, inDoc, stems, counts } = ready();
    const sectionParents = Search._index.sectionparents || {}; // page -> {subsection: section}
    // The query's stems, made as the index's are (Sphinx's parser does not know the older
    // wordings), with the parts of unknown identifiers; its "-excluded" words as Sphinx parsed
    // them.
    const known = [...new Set([...stems(query), ...compoundParts(query, stems, idf)])].filter(
      counts,
    );
    const totalIdf = known.reduce((sum, s) => sum + idf(s), 0);
    const queryNormal = normal(query);
    const queryWords = queryNormal.trim() ? queryNormal.trim().split(" ").length : 0;
    // Recognised phrases: index entries, headings and titles of any page (two words or more) that
    // the query contains, such as a pasted error message. The query's other words are its
    // situation (MAML, a critic, a spiking cell), which decides between the pages treating it.
    const recognised = new Set();
    for (const doc of docs)
      for (const [text, , unit] of [...doc.entries, ...doc.headings])
        if (text.trim().split(" ").length >= MIN_PHRASE_WORDS && queryNormal.includes(text))
          unit.forEach((s) => recognised.add(s));
    const situation = known.filter((s) => !recognised.has(s));
    const results = [];
    for (const doc of docs) {
      if ([...excludedTerms].some((s) => inDoc(doc, s))) continue;
      const matches = [
        phrase(doc.titleNormal, queryNormal, queryWords, WEIGHT.titlePhrase) +
          together(doc.titleStems, known, idf, WEIGHT.titleWords),
      ];
      // Sections: the query's words in one section's heading and the index entries placed in it
      // (the entries under the title count for the page's top, ""), together when choosing the
      // link; as separate units (a heading, a section's entries) for the focus and situation.
      const sections = new Map(); // anchor -> [score, stems]
      const units = new Map(); // a heading, or the index entries of one section -> stems
      const contains = new Set(); // sections with a heading or entry that the query contains
      const add = (anchor, score, unit, kind, text) => {
        if (!sections.has(anchor)) sections.set(anchor, [0, new Set()]);
        const section = sections.get(anchor);
        if (text.trim().split(" ").length >= MIN_PHRASE_WORDS && queryNormal.includes(text))
          contains.add(anchor);
        section[0] += score;
        unit.forEach((s) => section[1].add(s));
        if (!units.has(kind + anchor)) units.set(kind + anchor, new Set());
        unit.forEach((s) => units.get(kind + anchor).add(s));
      };
      for (const [text, anchor, unit] of doc.entries) {
        const score =
          phrase(text, queryNormal, queryWords, WEIGHT.entryPhrase) +
          together(unit, known, idf, WEIGHT.entryWords);
        matches.push(score);
        add(anchor, score, unit, "e", text);
      }
      for (const [text, id, unit] of doc.headings) {
        const score =
          phrase(text, queryNormal, queryWords, WEIGHT.headingPhrase) +
          together(unit, known, idf, WEIGHT.headingWords);
        matches.push(score);
        add(id || "", score, unit, "h", text);
      }
      const phraseScore = matches.reduce((sum, m) => sum + m, 0);
      let anchor = "";
      let best = 0;
      let situated = 0; // the situation's words in one unit (a heading, or a section's entries)
      const idfIn = (unit, list) => list.reduce((sum, s) => sum + (unit.has(s) ? idf(s) : 0), 0);
      for (const unit of units.values()) situated = Math.max(situated, idfIn(unit, situation));
      for (const [id, [score, unit]] of sections) {
        if (id === "") continue; // the page's top: linked when no section matches
        const own = idfIn(unit, situation);
        const words = idfIn(unit, known);
        const total = score + WEIGHT.sectionWords * words + WEIGHT.sectionSituation * own;
        if (total > best) [best, anchor] = [total, id ? `#${id}` : ""];
      }
      // The message names the section, the situation the case within it: a linked section whose
      // heading or entry the query contains hands the link to its subsection (at any depth) whose
      // heading or entry the query contains too (a more specific message: "output 0 of
      // ReluBackward0"), else to the one holding most of the situation's words, if one holds any.
      if (anchor && contains.has(anchor.slice(1))) {
        const enclosing = sectionParents[doc.docname] || {};
        const inside = (id, outer) => {
          for (let up = enclosing[id]; up !== undefined; up = enclosing[up])
            if (up === outer) return true;
          return false;
        };
        const outer = anchor.slice(1);
        let most = [0, 0]; // [named by the query, situation words]
        for (const [id, [, unit]] of sections) {
          if (!inside(id, outer)) continue;
          const own = [contains.has(id) ? 1 : 0, idfIn(unit, situation)];
          if (own[0] > most[0] || (own[0] === most[0] && own[1] > most[1]))
            [most, anchor] = [own, `#${id}`];
        }
      }
      // Each query word scores by where it is on the page; in index entries and headings fully
      // only within the unit holding the most of the query (the page's focus on it), elsewhere
      // by the factor `elsewhere` (a page's long list of entries catches many words one by one).
      let focus = new Set();
      let focusCovered = -1;
      for (const unit of units.values()) {
        const covered = known.reduce((sum, s) => sum + (unit.has(s) ? idf(s) : 0), 0);
        if (covered > focusCovered) [focusCovered, focus] = [covered, unit];
      }
      let wordScore = 0;
      let found = 0;
      for (const s of known) {
        const near = focus.has(s) ? 1 : WEIGHT.elsewhere;
        let where = 0;
        if (doc.titleStems.has(s)) where += WEIGHT.title;
        if (doc.entryStems.has(s)) where += WEIGHT.entry * near;
        if (doc.headingStems.has(s)) where += WEIGHT.heading * near;
        const inText = textFiles.has(s) && textFiles.get(s).has(doc.file);
        if (inText) where += WEIGHT.text;
        if (where > 0) {
          wordScore += idf(s) * where;
          const placed = doc.titleStems.has(s) || doc.entryStems.has(s) || doc.headingStems.has(s);
          found += idf(s) * (placed ? 1 : WEIGHT.textShare);
        }
      }
      if (found === 0 && phraseScore === 0) continue;
      const share = totalIdf > 0 ? found / totalIdf : 1;
      const own = doc.routing ? 0 : WEIGHT.situation * situated;
      let score = (wordScore + phraseScore + own) * share ** WEIGHT.share;
      if (doc.quoting) score *= WEIGHT.quoting;
      if (doc.reference && !known.some((s) => doc.own.has(s))) score *= WEIGHT.reference;
      if (doc.example && totalIdf > 0 && idfIn(doc.opening, known) < WEIGHT.namesExample * totalIdf)
        score *= WEIGHT.example;
      results.push({ doc, score, share, anchor, wordScore, phraseScore, best, situated });
    }
    results.sort(
      (a, b) =>
        b.score - a.score ||
        b.share - a.share ||
        a.doc.vocabulary - b.doc.vocabulary ||
        (a.doc.docname < b.doc.docname ? -1 : a.doc.docname > b.doc.docname ? 1 : 0),
    );
    return results;
  };

  // The replacement of Search._performSearch: the same result rows, best last (searchtools.js
  // shows them by popping from the end of the list).
  const performSearch = (query, searchTerms, excludedTerms) => {
    document.getElementById("search-progress")?.replaceChildren(); // "Preparing search..."
    const index = Search._index;
    return rank(query, searchTerms, excludedTerms)
      .map(({ doc, score, anchor }) => [
        doc.docname,
        doc.title,
        anchor,
        null,
        Math.round(score * 100) / 100,
        index.filenames[doc.file],
        SearchResultKind.text,
      ])
      .reverse();
  };

  const install = () => {
    Search._performSearch = performSearch;
    if (window.location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined")
      DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  };

  // For the browser console: why each page ranks where it does, e.g.
  // SiteSearch.explain("memory leak") -> [{page, score, words, phrases, share}, ...]
  // (The query's stems, as the search page finds them for a query without "-excluded" words.)
  const explain = (query) => {
    return rank(query, new Set(), new Set()).map((r) => ({
      page: r.doc.docname + r.anchor,
      score: +r.score.toFixed(2),
      words: +r.wordScore.toFixed(2),
      phrases: +r.phraseScore.toFixed(2),
      share: +r.share.toFixed(2),
      section: +r.best.toFixed(2),
      situation: +r.situated.toFixed(2),
    }));
  };

  return { install, rank, explain, WEIGHT };
})();

if (typeof Search !== "undefined") SiteSearch.install();
else document.addEventListener("DOMContentLoaded", SiteSearch.install);
