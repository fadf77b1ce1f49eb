"""The toy corpus's words: subjects, nouns, verbs and adjectives with their English.

Build-time only: the grammar (``grammar.py``) builds sentences from these tables.
"""

from __future__ import annotations

from typing import NamedTuple


class Subject(NamedTuple):
    """Who a sentence is about: a pronoun, a name or 友達."""

    ja: str
    en: str  # as a sentence subject (capitalised where English always capitalises)
    person: int  # 1, 2 or 3: chooses am/are/is, do/does and eat/eats
    gender: str  # "m", "f" or "" (any): pronoun-name agreement (彼は太郎です)


PRONOUNS = (
    Subject("私", "I", 1, ""),
    Subject("あなた", "you", 2, ""),
    Subject("彼", "he", 3, "m"),
    Subject("彼女", "she", 3, "f"),
)
NAMES = (
    Subject("太郎", "Taro", 3, "m"),
    Subject("健太", "Kenta", 3, "m"),
    Subject("花子", "Hanako", 3, "f"),
    Subject("美咲", "Misaki", 3, "f"),
)
SUBJECTS = PRONOUNS + NAMES
FRIENDS = Subject("友達", "friends", 3, "")  # only in 友達と -> with friends
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


class VerbJa(NamedTuple):
    """A verb's Japanese forms (polite ます style, and the て form)."""

    present: str  # 食べます
    past: str  # 食べました
    negative: str  # 食べません
    past_negative: str  # 食べませんでした
    te: str  # 食べて: joins two clauses, or asks with ください

    def polite(self, past: bool, negative: bool) -> str:
        """The ます form a sentence ends with (a question adds か after it)."""
        if negative:
            return self.past_negative if past else self.negative
        return self.past if past else self.present


class VerbEn(NamedTuple):
    """A verb's English forms."""

    base: str  # eat: I eat, they eat, do ... eat, please eat
    third: str  # eats: he eats
    past: str  # ate


class Verb(NamedTuple):
    """A verb with its forms and what it combines with."""

    lemma: str  # English base form; the verb's name in a core
    ja: VerbJa
    en: VerbEn
    particle: str  # the object's particle: を, に or と ("" for intransitive verbs)
    objects: tuple[str, ...]  # Japanese objects it takes
    places: tuple[str, ...]  # where it may happen (で)
    company: bool  # may take "X と" (with X)


def _verb(stem, te, en, particle="を", objects=(), places=(), company=True) -> Verb:
    """A verb from its ます-stem (食べ), its て form and "base|3sg|past" English."""
    ja = VerbJa(
        *(stem + end for end in ("ます", "ました", "ません", "ませんでした")), te
    )
    english = VerbEn(*en.split("|"))
    lemma = english.base.split()[0]  # "listen to" -> "listen"
    return Verb(lemma, ja, english, particle, tuple(objects), places, company)


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
PERSON_VERBS = ("see", "meet", "help", "wait", "talk")

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
ADJECTIVES_FOR = {
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
