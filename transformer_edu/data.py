"""The toy Japanese -> English corpus, segmentation, vocabulary and batching.

Bottom up: a small deterministic grammar (lexicon -> templates -> ``generate``), the
shipped corpus file (``load_corpus``, ``write_corpus``), Japanese segmentation and
English tokenization, ``Vocab``, and padded ``Batch``es.

The corpus is generated, not collected: every Japanese sentence is a list of tokens
(私/は/太郎/です), and its English translation follows from the grammar, with the
SOV -> SVO reordering of real translation. The held-out ``"test"`` split holds unseen
*combinations* of seen words: each test sentence has a core (e.g. its
subject-verb-object triple) that no training sentence has, and every one of its words
occurs in training. Regenerate the shipped file with ``python -m transformer_edu.data``.
"""

from __future__ import annotations

import functools
import hashlib
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "ANIMALS",
    "DESTINATIONS",
    "NAMES",
    "PLACES",
    "SEASONS",
    "THINGS",
    "SPLITS",
    "Batch",
    "Example",
    "Pair",
    "Vocab",
    "batches",
    "build_vocabs",
    "corpus_lexicon",
    "corpus_stats",
    "corpus_text",
    "detokenize_en",
    "generate",
    "load_corpus",
    "make_batch",
    "order_pairs",
    "segment",
    "tokenize_en",
    "write_corpus",
]

SPLITS = ("train", "test", "all")
CORPUS_FILE = "ja_en.tsv"  # inside transformer_edu/corpus/
HEADER = "split\tja\ten"
TEST_FRACTION = 0.12  # share of the cores (combinations) held out per template...
TEST_FRACTION_LONG = 0.2  # ...but more of the long compound sentences


class Pair(NamedTuple):
    """One sentence pair: Japanese tokens and English tokens."""

    src: tuple[str, ...]  # Japanese tokens, e.g. ("私", "は", "太郎", "です")
    tgt: tuple[str, ...]  # English tokens, e.g. ("I", "am", "Taro")

    @property
    def ja(self) -> str:
        """The natural, unsegmented Japanese sentence: 私は太郎です."""
        return "".join(self.src)

    @property
    def en(self) -> str:
        """The English tokens joined by single spaces: "Do you like cats ?"."""
        return " ".join(self.tgt)


class Example(NamedTuple):
    """A generated pair, the grammar template it came from and its core combination."""

    pair: Pair
    split: str  # "train" or "test"
    template: str  # e.g. "svo", "prefer"
    core: tuple[
        str, ...
    ]  # the combination held out as a whole, e.g. subject-verb-object


# --- 1. the lexicon -------------------------------------------------------------------


class _Subject(NamedTuple):
    ja: str
    en: str  # as a sentence subject (capitalised where English always capitalises)
    person: int  # 1, 2 or 3: chooses am/are/is, do/does and eat/eats
    gender: str  # "m", "f" or "" (any): pronoun-name agreement (彼は太郎です)


PRONOUNS = (
    _Subject("私", "I", 1, ""),
    _Subject("あなた", "you", 2, ""),
    _Subject("彼", "he", 3, "m"),
    _Subject("彼女", "she", 3, "f"),
)
NAMES = (
    _Subject("太郎", "Taro", 3, "m"),
    _Subject("健太", "Kenta", 3, "m"),
    _Subject("花子", "Hanako", 3, "f"),
    _Subject("美咲", "Misaki", 3, "f"),
)
SUBJECTS = PRONOUNS + NAMES
FRIENDS = _Subject("友達", "friends", 3, "")  # only in 友達と -> with friends
JOBS = {
    "学生": "a student",
    "先生": "a teacher",
    "医者": "a doctor",
    "歌手": "a singer",
    "エンジニア": "an engineer",
}

# nouns as objects: plural or mass English, no article ("I eat apples")
FOODS = {
    "りんご": "apples",
    "パン": "bread",
    "魚": "fish",
    "寿司": "sushi",
    "ケーキ": "cake",
    "ラーメン": "ramen",
}
DRINKS = {
    "水": "water",
    "お茶": "tea",
    "コーヒー": "coffee",
    "牛乳": "milk",
    "ジュース": "juice",
}
ANIMALS = {
    "犬": "dogs",
    "猫": "cats",
    "鳥": "birds",
    "馬": "horses",
    "うさぎ": "rabbits",
}
SPORTS = {"サッカー": "soccer", "テニス": "tennis", "野球": "baseball"}
SEASONS = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}
MEDIA = {"映画": "movies", "音楽": "music", "本": "books"}
THINGS = {
    **FOODS,
    **DRINKS,
    **MEDIA,
    "新聞": "newspapers",
    "手紙": "letters",
    "漫画": "comics",
    "メール": "emails",
    "詩": "poems",
    "テレビ": "TV",
    "アニメ": "anime",
    "歌": "songs",
    "ラジオ": "the radio",
    "花": "flowers",
    **SPORTS,
}

# where (で), where to (に), when, with whom (と), how (で)
PLACES = {
    "家": "at home",
    "学校": "at school",
    "公園": "in the park",
    "図書館": "at the library",
    "駅": "at the station",
    "店": "at the store",
    "海": "in the sea",
    "プール": "in the pool",
}
DESTINATIONS = {
    "学校": "to school",
    "公園": "to the park",
    "図書館": "to the library",
    "駅": "to the station",
    "海": "to the sea",
    "東京": "to Tokyo",
    "京都": "to Kyoto",
}
PAST_TIMES = {"昨日": "yesterday", "先週": "last week", "今朝": "this morning"}
PRESENT_TIMES = {"毎日": "every day", "毎朝": "every morning", "毎週": "every week"}
VEHICLES = {"電車": "by train", "バス": "by bus", "車": "by car", "自転車": "by bike"}


class _Verb(NamedTuple):
    lemma: str  # English base form; the verb's name in a core
    ja: tuple[str, ...]  # ます, ました, ません, ませんでした and て forms
    en: tuple[str, ...]  # base, third person singular, past
    particle: str  # the object's particle: を, に or と ("" for intransitive verbs)
    objects: tuple[str, ...]  # Japanese objects it takes
    places: tuple[str, ...]  # where it may happen (で)
    company: bool  # may take "X と" (with X)


def _verb(stem, te, en, particle="を", objects=(), places=(), company=True) -> _Verb:
    """A verb from its ます-stem (食べ), its て form and "base|3sg|past" English."""
    ja = tuple(stem + end for end in ("ます", "ました", "ません", "ませんでした")) + (
        te,
    )
    en = tuple(en.split("|"))
    return _Verb(en[0].split()[0], ja, en, particle, tuple(objects), places, company)


_NAME_JA = tuple(n.ja for n in NAMES)
_OUT = ("家", "学校", "公園", "駅")
_MEET_AT = ("駅", "公園", "学校", "図書館")
VERBS = (
    _verb("食べ", "食べて", "eat|eats|ate", "を", FOODS, _OUT),
    _verb("飲み", "飲んで", "drink|drinks|drank", "を", DRINKS, _OUT),
    _verb("読み", "読んで", "read|reads|read", "を", ("本", "新聞", "手紙", "漫画"),
          ("家", "学校", "図書館", "駅"), company=False),
    _verb("書き", "書いて", "write|writes|wrote", "を", ("手紙", "メール", "詩"),
          ("家", "学校", "図書館"), company=False),
    _verb("買い", "買って", "buy|buys|bought", "を",
          ("りんご", "パン", "魚", "ケーキ", "お茶", "コーヒー", "牛乳", "本", "花",
           "漫画"),
          ("店", "駅")),
    _verb("見", "見て", "watch|watches|watched", "を",
          ("映画", "テレビ", "アニメ", "野球", "サッカー"), ("家", "学校")),
    _verb("聞き", "聞いて", "listen to|listens to|listened to", "を",
          ("音楽", "歌", "ラジオ"), ("家", "学校", "公園")),
    _verb("作り", "作って", "make|makes|made", "を",
          ("パン", "ケーキ", "寿司", "ラーメン"), ("家", "学校")),
    _verb("し", "して", "play|plays|played", "を", SPORTS, ("公園", "学校")),
    # people as objects; 見る is "see" here (the object decides: watch movies, see Taro)
    _verb("見", "見て", "see|sees|saw", "を", _NAME_JA, _MEET_AT, company=False),
    _verb("会い", "会って", "meet|meets|met", "に", _NAME_JA, _MEET_AT, company=False),
    _verb("手伝い", "手伝って", "help|helps|helped", "を", _NAME_JA, ("家", "学校"),
          company=False),
    _verb("待ち", "待って", "wait for|waits for|waited for", "を", _NAME_JA,
          ("駅", "公園", "学校"), company=False),
    _verb("話し", "話して", "talk with|talks with|talked with", "と", _NAME_JA,
          ("駅", "公園", "学校"), company=False),
    # intransitive
    _verb("走り", "走って", "run|runs|ran", "", (), ("公園", "学校")),
    _verb("泳ぎ", "泳いで", "swim|swims|swam", "", (), ("海", "プール")),
    _verb("歩き", "歩いて", "walk|walks|walked", "", (), ("公園", "駅")),
    _verb("寝", "寝て", "sleep|sleeps|slept", "", (), ("家",), company=False),
)  # fmt: skip
MOTION_VERBS = (
    _verb("行き", "行って", "go|goes|went", "に", DESTINATIONS),
    _verb("来", "来て", "come|comes|came", "に", DESTINATIONS),
)
_PERSON_VERBS = ("see", "meet", "help", "wait", "talk")

# この本はおもしろいです -> This book is interesting (singular nouns here)
DEMONSTRATIVES = {"この": "this", "あの": "that"}
SINGULAR = {
    "本": "book",
    "映画": "movie",
    "犬": "dog",
    "猫": "cat",
    "車": "car",
    "部屋": "room",
    "花": "flower",
    "ケーキ": "cake",
}
ADJECTIVES = {
    "大きい": "big",
    "小さい": "small",
    "新しい": "new",
    "古い": "old",
    "高い": "expensive",
    "安い": "cheap",
    "おもしろい": "interesting",
    "かわいい": "cute",
    "おいしい": "delicious",
    "きれい": "beautiful",
}
_ADJ_FOR = {
    "本": ("新しい", "古い", "高い", "安い", "おもしろい", "大きい", "小さい"),
    "映画": ("新しい", "古い", "おもしろい"),
    "犬": ("大きい", "小さい", "かわいい", "きれい"),
    "猫": ("大きい", "小さい", "かわいい", "きれい"),
    "車": ("大きい", "小さい", "新しい", "古い", "高い", "安い", "きれい"),
    "部屋": ("大きい", "小さい", "新しい", "古い", "きれい"),
    "花": ("大きい", "小さい", "きれい", "高い", "安い"),
    "ケーキ": ("大きい", "小さい", "おいしい", "高い", "安い", "きれい"),
}
# XはYより...です -> X is ...-er than Y
ANIMAL_COMPARATIVES = {
    "大きい": "bigger",
    "小さい": "smaller",
    "速い": "faster",
    "強い": "stronger",
    "かわいい": "cuter",
}
PERSON_COMPARATIVES = {
    "背 が 高い": "taller",  # three tokens
    "若い": "younger",
    "速い": "faster",
    "強い": "stronger",
}


# --- 2. English agreement -------------------------------------------------------------


def _be(s: _Subject, past: bool = False) -> str:
    if past:
        return "was" if s.person in (1, 3) else "were"
    return {1: "am", 2: "are", 3: "is"}[s.person]


def _do(s: _Subject, past: bool = False) -> str:
    return "did" if past else ("does" if s.person == 3 else "do")


def _cap(words: list[str]) -> list[str]:
    """Capitalise the first word of a sentence (names and "I" already are)."""
    return [words[0][:1].upper() + words[0][1:], *words[1:]] if words else words


def _words(*parts: str) -> list[str]:
    return [w for p in parts for w in p.split()]


# the sentence forms: (index into _Verb.ja, past?, negative?, question?)
FORMS = {
    "present": (0, False, False, False),
    "past": (1, True, False, False),
    "negative": (2, False, True, False),
    "past_negative": (3, True, True, False),
    "question": (0, False, False, True),
    "past_question": (1, True, False, True),
}


def _clause(s: _Subject, v: _Verb, form: str, rest: str) -> list[str]:
    """English for subject + verb in ``form`` + the rest (object, modifiers)."""
    _, past, negative, question = FORMS[form]
    base, s3, past_form = v.en
    if question:
        return _cap(_words(_do(s, past), s.en, base, rest, "?"))
    if negative:
        return _cap(_words(s.en, _do(s, past), "not", base, rest))
    return _cap(
        _words(s.en, past_form if past else (s3 if s.person == 3 else base), rest)
    )


# --- 3. deterministic choices ---------------------------------------------------------


def _hash(*parts: object) -> int:
    """A stable integer from ``parts`` (same on every machine and Python version)."""
    text = "\x1f".join(map(str, parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _pick(options: Sequence, *parts: object):
    return options[_hash(*parts) % len(options)]


def _maybe(p: float, *parts: object) -> bool:
    return _hash(*parts) % 1000 < p * 1000


def _subject_ok(s: _Subject, form: str) -> bool:
    """No questions about oneself ("Do I eat apples ?") in the corpus."""
    return not (s.ja == "私" and FORMS[form][3])


# --- 4. templates: each yields (core, japanese, english) ------------------------------

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


def _action(s: _Subject, v: _Verb, obj: str | None, n: int) -> tuple[list, list]:
    """One variant (number ``n``) of "S は [time] [X と] [place で] [O を] V"."""
    form = _pick(list(FORMS), "form", s.ja, v.lemma, obj, n)
    if not _subject_ok(s, form):
        form = {"question": "present", "past_question": "past"}[form]
    past = FORMS[form][1]
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
    ja.append(v.ja[FORMS[form][0]])
    if FORMS[form][3]:
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
            like = ("like", "likes", "liked")
            if form == "present":
                ja.append("です")
                eng = _words(s.en, like[1] if s.person == 3 else like[0], en)
            elif form == "negative":
                ja += ["では", "ありません"]
                eng = _words(s.en, _do(s), "not like", en)
            elif form == "question":
                ja += ["です", "か"]
                eng = _words(_do(s), s.en, "like", en, "?")
            else:
                ja.append("でした")
                eng = _words(s.en, "liked", en)
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
                    like = "likes" if s.person == 3 else "like"
                    if s.ja != "私" and _maybe(0.3, "prefer-question", s.ja, x, y):
                        ja.append("か")
                        eng = _words(_do(s), s.en, "like", y_en, "more than", x_en, "?")
                    else:
                        eng = _words(s.en, like, y_en, "more than", x_en)
                    yield (s.ja, x, y), ja, _cap(eng)


def _comparisons() -> _Gen:
    """犬は猫より大きいです -> Dogs are bigger than cats; 太郎は花子より若いです."""
    people = [(s, s.en, _be(s), s.ja) for s in SUBJECTS]
    animals = [(None, en, "are", ja) for ja, en in ANIMALS.items()]
    for xs, ys, adjectives in (
        (people, [p for p in people if p[0] in NAMES], PERSON_COMPARATIVES),
        (animals, animals, ANIMAL_COMPARATIVES),
    ):
        for s, x_en, be, x in xs:
            for _, y_en, _, y in ys:
                if x == y:
                    continue
                for adj, adj_en in adjectives.items():
                    ja = [x, "は", y, "より", *adj.split(), "です"]
                    question = (s is None or s.ja != "私") and _maybe(
                        0.25, "compare-question", x, y, adj
                    )
                    if question:
                        ja.append("か")
                        eng = _words(be, x_en, adj_en, "than", y_en, "?")
                    else:
                        eng = _words(x_en, be, adj_en, "than", y_en)
                    yield (x, y, adj), ja, _cap(eng)


def _descriptions() -> _Gen:
    """この本はとてもおもしろいです -> This book is very interesting."""
    for noun, adjectives in _ADJ_FOR.items():
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
    things = [v for v in VERBS if v.objects and v.lemma not in _PERSON_VERBS]
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
            base, s3, past_form = v.en
            eng += _words(past_form if past else (s3 if s.person == 3 else base))
            eng += _words(THINGS[o])
            if tag == 1 and friend:
                eng += ["with", friend.en]
            if _maybe(0.55, "cmp-place", tag, n):
                place = _pick(v.places, "cmp-place-which", tag, n)
                ja += [place, "で"]
                eng += _words(PLACES[place])
            ja += [o, v.particle]
            ja.append(v.ja[4] if tag == 1 else v.ja[1 if past else 0])
        eng = _cap(_words(s.en, *eng1, "and", *eng2, times[time] if time else ""))
        yield (s.ja, v1.lemma, o1, v2.lemma, o2), ja, eng
        made += 1
        if made == count:
            return


def _requests() -> _Gen:
    """水を飲んでください -> Please drink water."""
    for v in VERBS:
        if v.lemma in _PERSON_VERBS or not v.objects:
            continue
        for obj in v.objects:
            ja, rest = [], [THINGS[obj]]
            if _maybe(0.4, "req-place", v.lemma, obj):
                place = _pick(v.places, "req-place-which", v.lemma, obj)
                ja += [place, "で"]
                rest.append(PLACES[place])
            ja += [obj, v.particle, v.ja[4], "ください"]
            yield (v.lemma, obj), ja, _words("Please", v.en[0], *rest)


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
# sentences the book relies on, always in the train split: (template, core, ja, en).
# The first three are the running examples; all are order-sensitive pairs (the same
# tokens in another order mean something else). Where a template also generates one of
# them, generate() checks that the translations agree.
REQUIRED = (
    ("identity", ("私", "太郎"), "私 は 太郎 です", "I am Taro"),
    ("prefer", ("私", "犬", "猫"), "私 は 犬 より 猫 が 好き です",
     "I like cats more than dogs"),
    ("prefer", ("私", "猫", "犬"), "私 は 猫 より 犬 が 好き です",
     "I like dogs more than cats"),
    ("action", ("太郎", "see", "花子"), "太郎 は 花子 を 見ました", "Taro saw Hanako"),
    ("action", ("花子", "see", "太郎"), "花子 は 太郎 を 見ました", "Hanako saw Taro"),
    ("like", ("太郎", "花子"), "太郎 は 花子 が 好き です", "Taro likes Hanako"),
    ("like", ("花子", "太郎"), "花子 は 太郎 が 好き です", "Hanako likes Taro"),
    ("compare", ("犬", "猫", "大きい"), "犬 は 猫 より 大きい です",
     "Dogs are bigger than cats"),
    ("compare", ("猫", "犬", "大きい"), "猫 は 犬 より 大きい です",
     "Cats are bigger than dogs"),
)  # fmt: skip


# --- 5. the corpus --------------------------------------------------------------------


def generate() -> list[Example]:
    """Every corpus sentence, with its split: the grammar, sampled and split by core.

    Deterministic: choices come from SHA-256 hashes, not from a random generator.
    """
    required = {ja for _, _, ja, _ in REQUIRED}
    examples: list[Example] = []
    seen: dict[str, str] = {}
    for name, template in TEMPLATES.items():
        extra = [(c, ja.split(), en.split()) for t, c, ja, en in REQUIRED if t == name]
        rows = {}
        for core, ja, en in [*template(), *extra]:
            key = " ".join(ja)
            if seen.get(key, " ".join(en)) != " ".join(en):
                raise AssertionError(
                    f"{key!r} has two translations: {seen[key]!r}, {' '.join(en)!r}"
                )
            seen[key] = " ".join(en)
            rows[key] = (core, Pair(tuple(ja), tuple(en)))
        keys = sorted(rows, key=lambda k: (k not in required, _hash("sample", name, k)))
        keys = keys[: TEMPLATE_SIZES[name] or len(keys)]
        # hold out a fixed share of the cores, never one a required sentence has
        cores = sorted(
            {rows[k][0] for k in keys}, key=lambda c: _hash("split", name, c)
        )
        kept = {rows[k][0] for k in keys if k in required}
        share = TEST_FRACTION_LONG if name == "compound" else TEST_FRACTION
        held = [c for c in cores if c not in kept][: round(share * len(cores))]
        held_set = set(held)
        for k in keys:
            core, pair = rows[k]
            split = "test" if core in held_set else "train"
            examples.append(Example(pair, split, name, core))
    missing = required - {" ".join(e.pair.src) for e in examples}
    if missing:
        raise AssertionError(f"required sentences not generated: {sorted(missing)}")
    examples = _cover(examples)
    # the file order: the running examples first, then interleaved by a hash
    first = [ja for _, _, ja, _ in REQUIRED]
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
    return Path(__file__).with_name("corpus") / CORPUS_FILE


def write_corpus(path: str | Path | None = None) -> Path:
    """(Re)generate the corpus file; by default the one shipped in the package."""
    path = Path(path) if path is not None else _corpus_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(corpus_text(), encoding="utf-8")
    _read_corpus.cache_clear()
    corpus_lexicon.cache_clear()
    return path


@functools.cache
def _read_corpus() -> dict[str, tuple[Pair, ...]]:
    """The shipped file, parsed once: split -> pairs."""
    text = (
        resources.files("transformer_edu")
        .joinpath("corpus", CORPUS_FILE)
        .read_text(encoding="utf-8")
    )
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        raise ValueError(f"{CORPUS_FILE}: first line is not the header {HEADER!r}")
    splits: dict[str, list[Pair]] = {"train": [], "test": []}
    for number, line in enumerate(lines[1:], start=2):
        split, ja, en = line.split("\t")
        if split not in splits:
            raise ValueError(f"{CORPUS_FILE}:{number}: unknown split {split!r}")
        splits[split].append(Pair(tuple(ja.split(" ")), tuple(en.split(" "))))
    return {k: tuple(v) for k, v in splits.items()}


def load_corpus(split: str = "train") -> list[Pair]:
    """The shipped pairs of one split: "train", "test" (held out) or "all"."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}; expected one of {SPLITS}")
    corpus = _read_corpus()
    if split == "all":
        return [*corpus["train"], *corpus["test"]]
    return list(corpus[split])


def order_pairs(split: str = "train") -> list[tuple[Pair, Pair]]:
    """Sentence pairs with the same Japanese tokens in another order and a different
    English meaning; 私は犬より猫が好きです / 私は猫より犬が好きです come first."""
    groups: dict[tuple[str, ...], list[Pair]] = {}
    for p in load_corpus(split):
        groups.setdefault(tuple(sorted(p.src)), []).append(p)
    out = [
        (a, b)
        for group in groups.values()
        for i, a in enumerate(group)
        for b in group[i + 1 :]
        if a.tgt != b.tgt
    ]
    first = REQUIRED[1][2]
    out.sort(key=lambda ab: first not in (" ".join(ab[0].src), " ".join(ab[1].src)))
    return out


def corpus_stats(pairs: Sequence[Pair]) -> dict:
    """Sizes and source-length figures of some pairs (for the book and the report)."""
    lengths = [len(p.src) for p in pairs]
    return {
        "pairs": len(pairs),
        "src_len_min": min(lengths),
        "src_len_median": statistics.median(lengths),
        "src_len_max": max(lengths),
        "tgt_len_max": max(len(p.tgt) for p in pairs),
        "src_len_histogram": dict(sorted(Counter(lengths).items())),
    }


# --- 6. segmentation and tokenization -------------------------------------------------


@functools.cache
def corpus_lexicon() -> frozenset[str]:
    """Every Japanese word of the shipped corpus."""
    return frozenset(w for p in load_corpus("all") for w in p.src)


_TRAILING = "。．.？?！!"


def segment(text: str, lexicon: Iterable[str] | None = None) -> list[str]:
    """Split a Japanese sentence into words by longest match over ``lexicon``.

    A run of characters where no known word starts is one token, so an unknown word
    comes out whole (私はピカチュウです -> 私/は/ピカチュウ/です). Spaces (ASCII or
    full-width) separate chunks, each segmented on its own: 私は 太郎です works too.
    Surrounding whitespace and final 。/./？/? are dropped.
    """
    words = corpus_lexicon() if lexicon is None else frozenset(lexicon)
    text = text.strip().rstrip(_TRAILING).strip()
    longest = max(map(len, words), default=1)
    # str.split() with no argument splits on any Unicode space, U+3000 included
    return [t for chunk in text.split() for t in _longest_match(chunk, words, longest)]


def _longest_match(text: str, words: frozenset[str], longest: int) -> list[str]:
    """Segment one chunk with no spaces in it (see ``segment``)."""
    tokens, unknown, i = [], "", 0
    while i < len(text):
        match = next(
            (
                text[i : i + n]
                for n in range(min(longest, len(text) - i), 0, -1)
                if text[i : i + n] in words
            ),
            None,
        )
        if match is None:
            unknown += text[i]
            i += 1
            continue
        if unknown:
            tokens.append(unknown)
            unknown = ""
        tokens.append(match)
        i += len(match)
    if unknown:
        tokens.append(unknown)
    return tokens


_PUNCTUATION = "?!.,"


def tokenize_en(text: str) -> list[str]:
    """English words split on whitespace, with ? ! . , as tokens of their own.

    Case is kept: "Do you like cats?" -> ["Do", "you", "like", "cats", "?"].
    """
    for mark in _PUNCTUATION:
        text = text.replace(mark, f" {mark} ")
    return text.split()


def detokenize_en(tokens: Iterable[str]) -> str:
    """Tokens back to text, punctuation attached: [..., "cats", "?"] -> "...cats?"."""
    out = ""
    for t in tokens:
        out += t if (t in _PUNCTUATION or not out) else " " + t
    return out


# --- 7. vocabulary --------------------------------------------------------------------


class Vocab:
    """Tokens <-> ids. Ids: the four specials, then tokens by descending frequency,
    ties in code-point order, so the same corpus always gives the same ids."""

    PAD, BOS, EOS, UNK = 0, 1, 2, 3
    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, itos: Sequence[str]):
        if tuple(itos[:4]) != self.SPECIALS:
            raise ValueError(
                f"a vocabulary starts with {self.SPECIALS}, got {tuple(itos[:4])}"
            )
        self.itos = list(itos)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dup = [s for s, n in Counter(self.itos).items() if n > 1]
            raise ValueError(f"duplicate tokens in vocabulary: {dup}")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """A vocabulary of every token seen at least ``min_freq`` times."""
        if min_freq < 1:
            raise ValueError(f"min_freq={min_freq} must be at least 1")
        counts = Counter(t for s in sentences for t in s)
        kept = [t for t, n in counts.items() if n >= min_freq and t not in cls.SPECIALS]
        kept.sort(key=lambda t: (-counts[t], t))
        return cls([*cls.SPECIALS, *kept])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {self.itos[4:9]}...)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    __hash__ = None  # type: ignore[assignment]

    def encode(
        self, tokens: Iterable[str], bos: bool = False, eos: bool = False
    ) -> list[int]:
        """Token ids, unknown tokens as UNK, optionally framed by BOS ... EOS."""
        ids = [self.stoi.get(t, self.UNK) for t in tokens]
        return [self.BOS] * bos + ids + [self.EOS] * eos

    def decode(
        self, ids: Iterable[int] | Tensor, strip_special: bool = True
    ) -> list[str]:
        """Tokens up to the first EOS; PAD, BOS and EOS dropped if ``strip_special``."""
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode takes one sequence, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.itos):
                raise ValueError(
                    f"id {i} is outside the vocabulary of size {len(self)}"
                )
            if i == self.EOS:
                if not strip_special:
                    out.append(self.itos[i])
                break
            if strip_special and i in (self.PAD, self.BOS):
                continue
            out.append(self.itos[i])
        return out

    def unknown(self, tokens: Iterable[str]) -> list[str]:
        """The tokens this vocabulary does not know, in order, each once."""
        return list(dict.fromkeys(t for t in tokens if t not in self.stoi))

    def to_dict(self) -> dict:
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        if "itos" not in d:
            raise ValueError(f"a vocabulary dict needs the key 'itos', got {sorted(d)}")
        return cls(d["itos"])


def build_vocabs(pairs: Iterable[Pair], min_freq: int = 1) -> tuple[Vocab, Vocab]:
    """Source (Japanese) and target (English) vocabularies of ``pairs``."""
    pairs = list(pairs)
    return (
        Vocab.build((p.src for p in pairs), min_freq),
        Vocab.build((p.tgt for p in pairs), min_freq),
    )


# --- 8. batches -----------------------------------------------------------------------


class Batch(NamedTuple):
    """Padded id tensors of some pairs, ready for teacher forcing.

    Shape: src (B, S); tgt_in (B, T) = BOS + target; tgt_out (B, T) = target + EOS;
    all padded with PAD = 0.
    """

    src: Tensor  # (B, S)
    tgt_in: Tensor  # (B, T)
    tgt_out: Tensor  # (B, T)
    pairs: list[Pair]

    @property
    def ntokens(self) -> int:
        """Number of real (non-PAD) target tokens: the loss is averaged over these."""
        return int((self.tgt_out != Vocab.PAD).sum())

    def to(self, device: torch.device | str) -> Batch:
        return self._replace(
            src=self.src.to(device),
            tgt_in=self.tgt_in.to(device),
            tgt_out=self.tgt_out.to(device),
        )


def _pad(rows: list[list[int]]) -> Tensor:
    out = torch.full((len(rows), max(map(len, rows))), Vocab.PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def make_batch(pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab) -> Batch:
    """Encode and pad ``pairs`` into one Batch."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("make_batch needs at least one pair, got 0")
    src = _pad([src_vocab.encode(p.src) for p in pairs])  # (B, S)
    tgt = [tgt_vocab.encode(p.tgt) for p in pairs]
    tgt_in = _pad([[Vocab.BOS, *t] for t in tgt])  # (B, T)
    tgt_out = _pad([[*t, Vocab.EOS] for t in tgt])  # (B, T)
    return Batch(src, tgt_in, tgt_out, pairs)


def batches(
    pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    sort_by_length: bool = False,
) -> Iterator[Batch]:
    """One epoch of Batches; the same ``seed`` gives the same batches.

    ``sort_by_length`` groups sentences of similar source length (less padding); the
    order of the batches is still shuffled when ``shuffle``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    pairs = list(pairs)
    order = list(range(len(pairs)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    if sort_by_length:  # a stable sort keeps the shuffled order among equal lengths
        order.sort(key=lambda i: (len(pairs[i].src), len(pairs[i].tgt)))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle and sort_by_length:
        rng.shuffle(chunks)
    for chunk in chunks:
        yield make_batch([pairs[i] for i in chunk], src_vocab, tgt_vocab)


# --- 9. command line ------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m transformer_edu.data [--check]``: regenerate (or check) the file."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m transformer_edu.data")
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
        pairs = load_corpus(split)
        s = corpus_stats(pairs)
        src, tgt = build_vocabs(pairs)
        print(
            f"{split}: {s['pairs']} pairs, source length {s['src_len_min']}-"
            f"{s['src_len_max']} (median {s['src_len_median']}), "
            f"vocab ja {len(src)} en {len(tgt)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
