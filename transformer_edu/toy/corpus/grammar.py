"""The grammar that writes the toy corpus: templates, agreement, splits, the file.

Build-time only: ``python -m transformer_edu.toy.corpus.grammar`` rewrites ``ja_en.tsv``
(``--check`` only compares); training reads that file through ``transformer_edu.toy.data``.

Every Japanese sentence is a list of tokens (私/は/太郎/です), and its English
translation follows from the grammar, with the SOV -> SVO reordering of real
translation. The held-out ``"test"`` split holds unseen *combinations* of seen words:
each test sentence has a core (e.g. its subject-verb-object triple) that no training
sentence has, and every one of its words occurs in training.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from .. import data
from ..data import CORPUS_FILE, HEADER, Pair
from .lexicon import (
    ADJECTIVES,
    ADJECTIVES_FOR,
    ANIMAL_COMPARATIVES,
    ANIMALS,
    DEMONSTRATIVES,
    DESTINATIONS,
    DRINKS,
    FOODS,
    FRIENDS,
    JOBS,
    MEDIA,
    MOTION_VERBS,
    NAMES,
    PAST_TIMES,
    PERSON_COMPARATIVES,
    PERSON_VERBS,
    PLACES,
    PRESENT_TIMES,
    PRONOUNS,
    SEASONS,
    SINGULAR,
    SPORTS,
    SUBJECTS,
    THINGS,
    VEHICLES,
    VERBS,
    Subject,
    Verb,
    VerbEn,
)

TEST_FRACTION = 0.12  # share of the cores (combinations) held out per template...
TEST_FRACTION_LONG = 0.2  # ...but more of the long compound sentences


class Example(NamedTuple):
    """A generated pair, the grammar template it came from and its core combination."""

    pair: Pair
    split: str  # "train" or "test"
    template: str  # a key of TEMPLATES, e.g. "action", "prefer"
    # the combination held out as a whole, e.g. subject-verb-object
    core: tuple[str, ...]


# --- 1. English agreement -------------------------------------------------------------


def _be(s: Subject, past: bool = False) -> str:
    if past:
        return "was" if s.person in (1, 3) else "were"
    return {1: "am", 2: "are", 3: "is"}[s.person]


def _do(s: Subject, past: bool = False) -> str:
    return "did" if past else ("does" if s.person == 3 else "do")


def _verb_en(s: Subject, en: VerbEn, past: bool = False) -> str:
    """The verb as it agrees with ``s``: ate, eats or eat."""
    return en.past if past else (en.third if s.person == 3 else en.base)


def _cap(words: list[str]) -> list[str]:
    """Capitalise the first word of a sentence (names and "I" already are)."""
    return [words[0][:1].upper() + words[0][1:], *words[1:]] if words else words


def _words(*parts: str) -> list[str]:
    return [w for p in parts for w in p.split()]


class Form(NamedTuple):
    """A sentence form: tense, polarity and mood."""

    past: bool
    negative: bool
    question: bool


# the sentence forms an action takes (its Japanese verb: VerbJa.polite)
FORMS = {
    "present": Form(past=False, negative=False, question=False),
    "past": Form(past=True, negative=False, question=False),
    "negative": Form(past=False, negative=True, question=False),
    "past_negative": Form(past=True, negative=True, question=False),
    "question": Form(past=False, negative=False, question=True),
    "past_question": Form(past=True, negative=False, question=True),
}


def _clause(s: Subject, v: Verb, form: str, rest: str) -> list[str]:
    """English for subject + verb in ``form`` + the rest (object, modifiers)."""
    f = FORMS[form]
    if f.question:
        return _cap(_words(_do(s, f.past), s.en, v.en.base, rest, "?"))
    if f.negative:
        return _cap(_words(s.en, _do(s, f.past), "not", v.en.base, rest))
    return _cap(_words(s.en, _verb_en(s, v.en, f.past), rest))


# --- 2. deterministic choices ---------------------------------------------------------


def _hash(*parts: object) -> int:
    """A stable integer from ``parts`` (same on every machine and Python version)."""
    text = "\x1f".join(map(str, parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _pick(options: Sequence, *parts: object):
    return options[_hash(*parts) % len(options)]


def _maybe(p: float, *parts: object) -> bool:
    return _hash(*parts) % 1000 < p * 1000


def _subject_ok(s: Subject, form: str) -> bool:
    """No questions about oneself ("Do I eat apples ?") in the corpus."""
    return not (s.ja == "私" and FORMS[form].question)


# --- 3. templates: each yields (core, japanese, english) ------------------------------

_Gen = Iterator[tuple[tuple[str, ...], list[str], list[str]]]


def _identity() -> _Gen:
    """私は太郎です -> I am Taro; 彼は医者ではありません -> He is not a doctor."""
    for s in SUBJECTS:
        nouns = {**JOBS}
        if s in PRONOUNS:  # 彼は太郎です, but not 太郎は花子です
            nouns |= {n.ja: n.en for n in NAMES if s.gender in ("", n.gender)}
        for noun, en in nouns.items():
            for form in ("present", "negative", "question"):
                if not _subject_ok(s, form):
                    continue
                if form == "present":
                    ja, eng = [s.ja, "は", noun, "です"], _words(s.en, _be(s), en)
                elif form == "negative":
                    ja = [s.ja, "は", noun, "では", "ありません"]
                    eng = _words(s.en, _be(s), "not", en)
                else:
                    ja, eng = (
                        [s.ja, "は", noun, "です", "か"],
                        _words(_be(s), s.en, en, "?"),
                    )
                yield (s.ja, noun), ja, _cap(eng)


def _action(s: Subject, v: Verb, obj: str | None, n: int) -> tuple[list, list]:
    """One variant (number ``n``) of "S は [time] [X と] [place で] [O を] V"."""
    form = _pick(list(FORMS), "form", s.ja, v.lemma, obj, n)
    if not _subject_ok(s, form):
        form = {"question": "present", "past_question": "past"}[form]
    past = FORMS[form].past
    ja, rest = [s.ja, "は"], []
    if v in MOTION_VERBS:
        rest.append(DESTINATIONS[obj])
    elif obj is not None:
        rest.append(THINGS.get(obj) or next(p.en for p in NAMES if p.ja == obj))
    times = PAST_TIMES if past else PRESENT_TIMES
    time = _pick(list(times), "time", s.ja, v.lemma, obj, n)
    use_time = _maybe(0.45, "use-time", s.ja, v.lemma, obj, n)
    if use_time:
        ja.append(time)
    if v.company and _maybe(0.3, "use-company", s.ja, v.lemma, obj, n):
        others = [p for p in NAMES if p.ja != s.ja] + [FRIENDS]
        friend = _pick(others, "company", s.ja, v.lemma, obj, n)
        ja += [friend.ja, "と"]
        rest.append("with " + friend.en)
    if v in MOTION_VERBS:
        if _maybe(0.4, "use-vehicle", s.ja, v.lemma, obj, n):
            vehicle = _pick(list(VEHICLES), "vehicle", s.ja, v.lemma, obj, n)
            ja += [vehicle, "で"]
            rest.append(VEHICLES[vehicle])
    elif _maybe(0.5, "use-place", s.ja, v.lemma, obj, n):
        place = _pick(v.places, "place", s.ja, v.lemma, obj, n)
        ja += [place, "で"]
        rest.append(PLACES[place])
    if obj is not None:
        ja += [obj, v.particle]
    ja.append(v.ja.polite(past, FORMS[form].negative))
    if FORMS[form].question:
        ja.append("か")
    if use_time:
        rest.append(times[time])
    return ja, _clause(s, v, form, " ".join(rest))


def _actions(variants: int = 2) -> _Gen:
    """太郎は昨日公園で花子に会いました -> Taro met Hanako in the park yesterday."""
    for v in VERBS:
        for s in SUBJECTS:
            for obj in v.objects or (None,):
                if obj == s.ja:
                    continue
                for n in range(variants):
                    ja, en = _action(s, v, obj, n)
                    yield (s.ja, v.lemma, obj or ""), ja, en


def _motions(variants: int = 2) -> _Gen:
    """彼女は電車で京都に行きました -> She went to Kyoto by train."""
    for v in MOTION_VERBS:
        for s in SUBJECTS:
            for dest in v.objects:
                for n in range(variants):
                    ja, en = _action(s, v, dest, n)
                    yield (s.ja, v.lemma, dest), ja, en


_LIKE = VerbEn("like", "likes", "liked")  # English for 好き (an adjective in Japanese)


def _likes() -> _Gen:
    """私は猫が好きです -> I like cats; 太郎は花子が好きです -> Taro likes Hanako."""
    objects = {**ANIMALS, **FOODS, **DRINKS, **SPORTS, **SEASONS, **MEDIA}
    objects |= {n.ja: n.en for n in NAMES}
    for s in SUBJECTS:
        for obj, en in objects.items():
            if obj == s.ja:
                continue
            form = _pick(("present", "negative", "question", "past"), "like", s.ja, obj)
            if not _subject_ok(s, form):
                form = "present"
            ja = [s.ja, "は", obj, "が", "好き"]
            if form == "present":
                ja.append("です")
                eng = _words(s.en, _verb_en(s, _LIKE), en)
            elif form == "negative":
                ja += ["では", "ありません"]
                eng = _words(s.en, _do(s), "not like", en)
            elif form == "question":
                ja += ["です", "か"]
                eng = _words(_do(s), s.en, "like", en, "?")
            else:
                ja.append("でした")
                eng = _words(s.en, _LIKE.past, en)
            yield (s.ja, obj), ja, _cap(eng)


def _preferences() -> _Gen:
    """私は犬より猫が好きです -> I like cats more than dogs (and the reverse)."""
    for group in (ANIMALS, FOODS, DRINKS, SPORTS, SEASONS):
        for s in SUBJECTS:
            for x, x_en in group.items():
                for y, y_en in group.items():
                    if x == y:
                        continue
                    ja = [s.ja, "は", x, "より", y, "が", "好き", "です"]
                    like = _verb_en(s, _LIKE)
                    if s.ja != "私" and _maybe(0.3, "prefer-question", s.ja, x, y):
                        ja.append("か")
                        eng = _words(_do(s), s.en, "like", y_en, "more than", x_en, "?")
                    else:
                        eng = _words(s.en, like, y_en, "more than", x_en)
                    yield (s.ja, x, y), ja, _cap(eng)


class _Compared(NamedTuple):
    """One side of a comparison: a person or an animal."""

    subject: Subject | None  # None for an animal
    en: str
    be: str  # am, are or is
    ja: str


def _comparisons() -> _Gen:
    """犬は猫より大きいです -> Dogs are bigger than cats; 太郎は花子より若いです."""
    people = [_Compared(s, s.en, _be(s), s.ja) for s in SUBJECTS]
    animals = [_Compared(None, en, "are", ja) for ja, en in ANIMALS.items()]
    for xs, ys, adjectives in (
        (people, [p for p in people if p.subject in NAMES], PERSON_COMPARATIVES),
        (animals, animals, ANIMAL_COMPARATIVES),
    ):
        for x in xs:
            for y in ys:
                if x.ja == y.ja:
                    continue
                for adj, adj_en in adjectives.items():
                    ja = [x.ja, "は", y.ja, "より", *adj.split(), "です"]
                    # no questions about oneself
                    question = (x.subject is None or x.subject.ja != "私") and _maybe(
                        0.25, "compare-question", x.ja, y.ja, adj
                    )
                    if question:
                        ja.append("か")
                        eng = _words(x.be, x.en, adj_en, "than", y.en, "?")
                    else:
                        eng = _words(x.en, x.be, adj_en, "than", y.en)
                    yield (x.ja, y.ja, adj), ja, _cap(eng)


def _descriptions() -> _Gen:
    """この本はとてもおもしろいです -> This book is very interesting."""
    for noun, adjectives in ADJECTIVES_FOR.items():
        for adj in adjectives:
            for dem, dem_en in DEMONSTRATIVES.items():
                very = _maybe(0.3, "very", noun, adj, dem)
                ja = [dem, noun, "は", *(["とても"] if very else []), adj, "です"]
                adj_en = ("very " if very else "") + ADJECTIVES[adj]
                if _maybe(0.3, "describe-question", noun, adj, dem):
                    ja.append("か")
                    eng = _words("is", dem_en, SINGULAR[noun], adj_en, "?")
                else:
                    eng = _words(dem_en, SINGULAR[noun], "is", adj_en)
                yield (noun, adj), ja, _cap(eng)


def _compounds(count: int = 460) -> _Gen:
    """太郎は昨日家でパンを食べて、駅でコーヒーを飲みました
    -> Taro ate bread at home and drank coffee at the station yesterday."""
    things = [v for v in VERBS if v.objects and v.lemma not in PERSON_VERBS]
    made = 0
    for n in range(10 * count):
        s = _pick(SUBJECTS, "cmp-s", n)
        v1, v2 = _pick(things, "cmp-v1", n), _pick(things, "cmp-v2", n)
        o1, o2 = _pick(v1.objects, "cmp-o1", n), _pick(v2.objects, "cmp-o2", n)
        if v1 == v2:
            continue
        past = _maybe(0.6, "cmp-past", n)
        ja, eng1, eng2 = [s.ja, "は"], [], []
        times = PAST_TIMES if past else PRESENT_TIMES
        time = _pick(list(times), "cmp-time", n) if _maybe(0.6, "cmp-t", n) else None
        if time:
            ja.append(time)
        friend = None
        if v1.company and _maybe(0.3, "cmp-company", n):
            friend = _pick([p for p in NAMES if p != s], "cmp-friend", n)
            ja += [friend.ja, "と"]
        for v, o, eng, tag in ((v1, o1, eng1, 1), (v2, o2, eng2, 2)):
            if tag == 2:
                ja.append("、")
            eng += _words(_verb_en(s, v.en, past))
            eng += _words(THINGS[o])
            if tag == 1 and friend:
                eng += ["with", friend.en]
            if _maybe(0.55, "cmp-place", tag, n):
                place = _pick(v.places, "cmp-place-which", tag, n)
                ja += [place, "で"]
                eng += _words(PLACES[place])
            ja += [o, v.particle]
            # the first verb takes the て form; the second carries the tense
            ja.append(v.ja.te if tag == 1 else v.ja.polite(past, negative=False))
        eng = _cap(_words(s.en, *eng1, "and", *eng2, times[time] if time else ""))
        yield (s.ja, v1.lemma, o1, v2.lemma, o2), ja, eng
        made += 1
        if made == count:
            return


def _requests() -> _Gen:
    """水を飲んでください -> Please drink water."""
    for v in VERBS:
        if v.lemma in PERSON_VERBS or not v.objects:
            continue
        for obj in v.objects:
            ja, rest = [], [THINGS[obj]]
            if _maybe(0.4, "req-place", v.lemma, obj):
                place = _pick(v.places, "req-place-which", v.lemma, obj)
                ja += [place, "で"]
                rest.append(PLACES[place])
            ja += [obj, v.particle, v.ja.te, "ください"]
            yield (v.lemma, obj), ja, _words("Please", v.en.base, *rest)


TEMPLATES = {
    "identity": _identity,
    "action": _actions,
    "motion": _motions,
    "like": _likes,
    "prefer": _preferences,
    "compare": _comparisons,
    "describe": _descriptions,
    "compound": _compounds,
    "request": _requests,
}
# how many sentences to keep from each template (None: all it makes)
TEMPLATE_SIZES = {
    "identity": None,
    "action": 600,
    "motion": 160,
    "like": 220,
    "prefer": 260,
    "compare": 200,
    "describe": None,
    "compound": None,
    "request": None,
}


class Required(NamedTuple):
    """A sentence the book relies on, always in the train split."""

    template: str
    core: tuple[str, ...]
    ja: str  # tokens joined by spaces
    en: str  # tokens joined by spaces


# The first three are the running examples; all are order-sensitive pairs (the same
# tokens in another order mean something else). Where a template also generates one of
# them, generate() checks that the translations agree.
REQUIRED = (
    Required("identity", ("私", "太郎"), "私 は 太郎 です", "I am Taro"),
    Required("prefer", ("私", "犬", "猫"), "私 は 犬 より 猫 が 好き です",
             "I like cats more than dogs"),
    Required("prefer", ("私", "猫", "犬"), "私 は 猫 より 犬 が 好き です",
             "I like dogs more than cats"),
    Required("action", ("太郎", "see", "花子"), "太郎 は 花子 を 見ました",
             "Taro saw Hanako"),
    Required("action", ("花子", "see", "太郎"), "花子 は 太郎 を 見ました",
             "Hanako saw Taro"),
    Required("like", ("太郎", "花子"), "太郎 は 花子 が 好き です", "Taro likes Hanako"),
    Required("like", ("花子", "太郎"), "花子 は 太郎 が 好き です", "Hanako likes Taro"),
    Required("compare", ("犬", "猫", "大きい"), "犬 は 猫 より 大きい です",
             "Dogs are bigger than cats"),
    Required("compare", ("猫", "犬", "大きい"), "猫 は 犬 より 大きい です",
             "Cats are bigger than dogs"),
)  # fmt: skip


# --- 4. the corpus --------------------------------------------------------------------


def generate() -> list[Example]:
    """Every corpus sentence, with its split: the grammar, sampled and split by core.

    Deterministic: choices come from SHA-256 hashes, not from a random generator.
    """
    required = {r.ja for r in REQUIRED}
    examples: list[Example] = []
    seen: dict[str, str] = {}
    for name, template in TEMPLATES.items():
        extra = [
            (r.core, r.ja.split(), r.en.split()) for r in REQUIRED if r.template == name
        ]
        rows: dict[str, Example] = {}  # Japanese sentence -> example, all "train" yet
        for core, ja, en in [*template(), *extra]:
            key = " ".join(ja)
            if seen.get(key, " ".join(en)) != " ".join(en):
                raise AssertionError(
                    f"{key!r} has two translations: {seen[key]!r}, {' '.join(en)!r}"
                )
            seen[key] = " ".join(en)
            rows[key] = Example(Pair(tuple(ja), tuple(en)), "train", name, core)
        keys = sorted(rows, key=lambda k: (k not in required, _hash("sample", name, k)))
        keys = keys[: TEMPLATE_SIZES[name] or len(keys)]
        # hold out a fixed share of the cores, never one a required sentence has
        cores = sorted(
            {rows[k].core for k in keys}, key=lambda c: _hash("split", name, c)
        )
        kept = {rows[k].core for k in keys if k in required}
        share = TEST_FRACTION_LONG if name == "compound" else TEST_FRACTION
        held = set([c for c in cores if c not in kept][: round(share * len(cores))])
        for k in keys:
            e = rows[k]
            examples.append(e._replace(split="test") if e.core in held else e)
    missing = required - {" ".join(e.pair.src) for e in examples}
    if missing:
        raise AssertionError(f"required sentences not generated: {sorted(missing)}")
    examples = _cover(examples)
    # the file order: the running examples first, then interleaved by a hash
    first = [r.ja for r in REQUIRED]
    return sorted(
        examples,
        key=lambda e: (
            first.index(" ".join(e.pair.src))
            if " ".join(e.pair.src) in first
            else len(first),
            _hash("order", " ".join(e.pair.src)),
        ),
    )


def _cover(examples: list[Example]) -> list[Example]:
    """Move held-out cores with a word unseen in training back to train, until none."""
    while True:
        train_words = {w for e in examples if e.split == "train" for w in e.pair.src}
        train_words |= {w for e in examples if e.split == "train" for w in e.pair.tgt}
        move = {
            (e.template, e.core)
            for e in examples
            if e.split == "test" and not set(e.pair.src + e.pair.tgt) <= train_words
        }
        if not move:
            break
        examples = [
            e._replace(split="train") if (e.template, e.core) in move else e
            for e in examples
        ]
    return examples


def corpus_text(examples: Iterable[Example] | None = None) -> str:
    """The TSV file's content: a header, then split, Japanese and English tokens."""
    examples = generate() if examples is None else examples
    lines = [HEADER]
    for split in ("train", "test"):
        lines += [
            f"{split}\t{' '.join(e.pair.src)}\t{' '.join(e.pair.tgt)}"
            for e in examples
            if e.split == split
        ]
    return "\n".join(lines) + "\n"


def _corpus_path() -> Path:
    return Path(__file__).with_name(CORPUS_FILE)  # beside this module


def write_corpus(path: str | Path | None = None) -> Path:
    """(Re)generate the corpus file; by default the one shipped in the package."""
    path = Path(path) if path is not None else _corpus_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(corpus_text(), encoding="utf-8")
    # the run-time reader caches the parsed file: make it read the new one
    data._read_corpus.cache_clear()
    data.corpus_lexicon.cache_clear()
    return path


# --- 5. command line ------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m transformer_edu.toy.corpus.grammar [--check]``: regenerate (or check)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m transformer_edu.toy.corpus.grammar"
    )
    parser.add_argument(
        "--check", action="store_true", help="only compare, write nothing"
    )
    args = parser.parse_args(argv)
    if args.check:
        same = _corpus_path().read_text(encoding="utf-8") == corpus_text()
        print(
            "corpus file is up to date" if same else "corpus file differs: regenerate"
        )
        return 0 if same else 1
    path = write_corpus()
    print(f"wrote {path}")
    for split in ("train", "test"):
        pairs = data.load_corpus(split)
        s = data.corpus_stats(pairs)
        src, tgt = data.build_vocabs(pairs)
        print(
            f"{split}: {s['pairs']} pairs, source length {s['src_len_min']}-"
            f"{s['src_len_max']} (median {s['src_len_median']}), "
            f"vocab ja {len(src)} en {len(tgt)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
