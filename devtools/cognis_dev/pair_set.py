"""A labelled pair set for supersession: does a newer fact about a person make an older one no longer true?

Each pair is two short claims as an extraction model would write them (who the fact is about, the
attribute in the model's own words, a short value, the date it was said) and one label: is the older
claim no longer true once the newer one is said? It measures a model asked exactly that narrow
question, one pair at a time, apart from any extraction or retrieval.

Written here from the project's own templates (no outside data), in seven categories:

* ``change`` (True): a single-valued attribute takes a new value (job title, manager, phone, ...);
  both orders of the two values, each a change;
* ``ended`` (True): the older state stopped, with nothing or a negation in its place ("smokes" ->
  "quit smoking"); forward only, each situation twice in other words;
* ``multi_valued`` (False): an attribute holding several values at once gains one (pets, hobbies,
  allergies, ...); both orders;
* ``elaboration`` (False): the newer adds a detail without changing the older; both orders;
* ``other_person`` (False): the same kind of attribute, a different value, about someone else;
* ``same_value`` (False): the same value restated, in other words or under another key;
* ``unrelated`` (False): the same person, another attribute entirely.

No attribute or value of the knowledge-update set (:mod:`cognis_dev.update_set`: home city,
employer, diet, dog, car, exercise, commute, language learnt, morning drink, instrument) is used, so
the two sets measure different things. The seeded RNG picks only who the pair is about (a named
person or the unnamed ``user``; a relative or another named person for ``other_person``), the dates
(the older 5-120 days before the newer) and, for about a third of the same-attribute pairs, a
paraphrase of the key for the newer claim ("job title" / "role"); the templates, labels and ids do
not depend on the seed. A few pairs a careful reader could label either way are marked ``ambiguous``
(their most likely label kept, the reason in ``note``) so that scores can be reported with and
without them.

``python -m cognis_dev.pair_set [--seed N] [--dump FILE.jsonl]`` prints the counts per category and
writes the pairs as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

DESCRIPTION = "A labelled pair set for supersession: is an older fact about a person no longer true given a newer?"
CATEGORIES = ("change", "ended", "multi_valued", "elaboration", "other_person", "same_value", "unrelated")
#: the first day an older claim may be said
START = date(2024, 1, 8)
#: how many days after START the older claim may be said
SPAN_DAYS = 540
#: the newer claim comes this many days after the older (inclusive)
GAP_DAYS = (5, 120)
#: the share of same-attribute pairs whose newer claim words the key differently
PARAPHRASED = 1 / 3
NAMES = ("Maya", "Tomas", "Aiko", "Ruben", "Lena", "Omar", "Ines", "Kofi", "Sara", "Viktor", "Noor", "Pablo",
         "Greta", "Idris", "Yuki", "Hana")  # fmt: skip
#: how an extraction model names someone close to the subject ("Maya's brother", "user's flatmate")
RELATIVES = ("brother", "sister", "cousin", "mother", "father", "flatmate", "colleague", "best friend", "neighbour",
             "aunt", "uncle")  # fmt: skip


@dataclass(frozen=True)
class Claim:
    subject: str  # who the fact is about: "Maya", "user", "Maya's brother", "Ines"
    key: str  # the attribute in an extraction model's own words, lower case: "job title", "pets"
    value: str  # short: "charge nurse", "cat named Nutmeg", "quit smoking"
    said: date  # when it was said (the message date)


@dataclass(frozen=True)
class LabelledPair:
    id: str  # stable across seeds: "<category>-<topic>-<nn>-<fwd|rev>"
    category: str  # one of CATEGORIES
    older: Claim  # older.said < newer.said
    newer: Claim
    no_longer_true: bool  # the label: is `older` no longer true given `newer`?
    ambiguous: bool = False  # a careful reader could label it either way (the likelier label is kept)
    note: str = ""


# --------------------------------------------------------------------------------------
# templates
@dataclass(frozen=True)
class _Attribute:
    """A single-valued attribute: its key wordings (the usual one first) and pairs of values it may take."""

    topic: str
    keys: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    reversible: bool = True  # the second value said first, then the first, is a change too


CHANGE: tuple[_Attribute, ...] = (
    _Attribute("relationship-status", ("relationship status", "relationship", "dating status"),
               (("single", "in a relationship"),)),
    _Attribute("partner", ("partner", "significant other", "relationship"),
               (("Priya", "Jonas"), ("dating Elif", "dating Marco"))),
    _Attribute("job-title", ("job title", "role", "position"),
               (("data analyst", "product manager"), ("staff nurse", "charge nurse"),
                ("junior accountant", "senior accountant"), ("barista", "shift supervisor"))),
    _Attribute("manager", ("manager", "boss", "line manager"), (("Dana", "Rafael"), ("Ms Okafor", "Mr Lindqvist"))),
    _Attribute("neighbourhood", ("neighbourhood", "part of town", "district"),
               (("Old Quarter", "Riverside"), ("Hillcrest", "Canal Side"))),
    _Attribute("phone", ("phone", "phone model", "smartphone"), (("Pixel 7", "iPhone 15"), ("Galaxy S22", "Pixel 8"))),
    _Attribute("laptop", ("laptop", "computer", "work laptop"),
               (("ThinkPad X1 Carbon", "MacBook Air"), ("Dell XPS 13", "Framework 13"))),
    _Attribute("bank", ("main bank", "bank", "bank account"), (("Fernbrook Savings", "Alder Credit Union"),)),
    _Attribute("gym", ("gym", "gym membership", "fitness club"),
               (("Iron Works", "PulseFit"), ("the council leisure centre", "Summit Climbing Gym"))),
    _Attribute("bedtime", ("bedtime", "usual bedtime", "time for bed"),
               (("around 11 pm", "around 1 am"), ("10 pm", "midnight"))),
    _Attribute("wake-up-time", ("wake-up time", "alarm time", "usual wake-up time"),
               (("6:30 am", "8 am"), ("5 am", "7:15 am"))),
    _Attribute("degree", ("degree programme", "study major", "field of study"),
               (("biology", "computer science"), ("economics", "law"), ("history", "architecture"))),
    _Attribute("book", ("book currently reading", "current book", "book being read"),
               (("The Salt Road", "A Map of Small Hours"), ("Winter Orchard", "The Last Cartographer"))),
    _Attribute("project", ("current project", "work project", "project at work"),
               (("the billing migration", "the mobile app redesign"),)),
    _Attribute("shift-pattern", ("shift pattern", "work shifts", "work schedule"),
               (("night shifts", "day shifts"), ("weekend shifts", "weekday shifts"))),
    _Attribute("hair-colour", ("hair colour", "hair color", "hair"), (("brown", "dyed blue"), ("blonde", "red"))),
    _Attribute("training-goal", ("training goal", "running goal", "fitness goal"),
               (("half marathon", "full marathon"), ("10k under 50 minutes", "sprint triathlon"))),
    _Attribute("mobile-carrier", ("mobile carrier", "phone network", "mobile provider"),
               (("Skyline Mobile", "Tallis Telecom"),)),
    _Attribute("tv-series", ("tv series currently watching", "current show", "series being watched"),
               (("The Lighthouse Keepers", "Dust and Gold"), ("Kingdom of Ash", "Low Tide"))),
    _Attribute("desk", ("desk location", "desk", "seat at the office"),
               (("third floor by the window", "second floor near the kitchen"), ("desk 14B", "desk 22A"))),
    _Attribute("childs-school", ("child's school", "son's school", "kid's school"),
               (("Elmwood Primary", "St Brigid's Academy"), ("Northgate Nursery", "Hillside Primary"))),
    _Attribute("team", ("team at work", "team", "department"),
               (("payments team", "search team"), ("customer support", "sales"))),
    _Attribute("doctor", ("family doctor", "doctor", "family physician"), (("Dr Haddad", "Dr Moreau"),)),
    _Attribute("internet-provider", ("internet provider", "broadband provider", "home internet"),
               (("Fibrenet", "Clearwave"),)),
    _Attribute("health", ("health status", "health", "injury"),
               (("recovering from a broken arm", "arm fully healed"),
                ("in a cast after knee surgery", "walking normally again")), reversible=False),
)  # fmt: skip


@dataclass(frozen=True)
class _Template:
    """Two claims' keys and values. ``newer_key`` empty: the same attribute, the newer worded from ``keys``."""

    topic: str
    keys: tuple[str, ...]  # the older claim's key wordings, the usual first
    older: str
    newer: str
    newer_key: str = ""


def _t(topic: str, keys: str | tuple[str, ...], older: str, newer: str, newer_key: str = "") -> _Template:
    return _Template(topic, (keys,) if isinstance(keys, str) else keys, older, newer, newer_key)


#: each situation twice, in other words
ENDED: tuple[_Template, ...] = (
    _t("smoking", ("smoking", "smoking status"), "smokes", "quit smoking"),
    _t("smoking", ("smoking habit", "smoking"), "smokes about ten cigarettes a day", "has not smoked for three months"),
    _t("gym-membership", ("gym membership", "gym"), "member of Iron Works gym", "cancelled the gym membership"),
    _t("gym-membership", ("gym", "fitness club"), "pays for a PulseFit membership", "no longer has a gym membership"),
    _t("marriage", ("marital status", "relationship status"), "married to Tom", "divorced"),
    _t("marriage", "husband", "Anders", "divorced from Anders", newer_key="marital status"),
    _t("sick-leave", ("work status", "employment status"), "on sick leave", "back at work"),
    _t("sick-leave", ("sick leave", "time off work"), "off work with a back injury", "returned to work full time"),
    _t("renting", ("housing", "living situation"), "renting a flat", "bought a house"),
    _t("renting", ("rent", "housing"), "pays rent to a landlord", "owns their home now"),
    _t("alcohol", ("alcohol", "drinking habits"), "drinks wine most evenings", "stopped drinking alcohol"),
    _t("alcohol", ("drinking", "alcohol"), "has a beer after work", "sober for six months"),
    _t("meal-kit", ("subscription", "meal kit subscription"), "subscribed to a meal-kit service",
       "cancelled the meal-kit subscription"),
    _t("meal-kit", ("meal kits", "food delivery"), "gets weekly recipe boxes", "stopped the recipe box deliveries"),
    _t("therapy", ("therapy", "mental health support"), "sees a therapist every week", "finished therapy"),
    _t("therapy", ("counselling", "therapy"), "in counselling", "no longer in counselling"),
    _t("course", ("evening course", "course"), "taking an evening pottery course", "finished the pottery course"),
    _t("course", ("class", "course"), "enrolled in a night class on accounting", "completed the accounting class"),
    _t("braces", ("braces", "teeth"), "wears braces", "braces taken off"),
    _t("braces", ("dental treatment", "braces"), "has a retainer fitted", "retainer removed for good"),
    _t("dating", ("dating", "relationship"), "dating Lukas", "broke up with Lukas"),
    _t("dating", "boyfriend", "Lukas", "single since splitting up with Lukas", newer_key="relationship status"),
    _t("volunteering", ("volunteering", "volunteer work"), "volunteers at the food bank on Saturdays",
       "stopped volunteering"),
    _t("volunteering", ("volunteer work", "volunteering"), "helps out at an animal shelter",
       "no longer volunteers at the shelter"),
    _t("side-business", ("side business", "side project"), "runs an online candle shop", "closed the candle shop"),
    _t("side-business", ("side hustle", "side business"), "sells prints at weekend markets",
       "gave up the market stall"),
    _t("medication", ("medication", "medicine"), "takes blood pressure tablets", "off the blood pressure tablets"),
    _t("medication", ("prescription", "medication"), "on antibiotics", "finished the course of antibiotics"),
    _t("coaching", ("coaching", "volunteer role"), "coaches a youth football team", "stepped down as coach"),
    _t("coaching", ("choir", "singing"), "sings in a community choir", "left the choir"),
    _t("motorbike", ("motorbike", "vehicle"), "owns a motorbike", "sold the motorbike"),
    _t("motorbike", ("scooter", "vehicle"), "rides a moped", "got rid of the moped"),
    _t("working", ("employment", "work status"), "works full time", "retired"),
    _t("working", ("job", "employment status"), "unemployed", "started a new job"),
    _t("student", ("student status", "education"), "university student", "graduated"),
    _t("student", ("studies", "education"), "doing a master's degree", "finished the master's"),
    _t("insomnia", ("sleep", "sleep problems"), "struggles with insomnia", "sleeping well again"),
    _t("insomnia", ("sleep problems", "sleep"), "wakes up every night at 3 am", "sleeps through the night now"),
    _t("student-loan", ("debt", "student loan"), "paying off a student loan", "paid off the student loan"),
    _t("student-loan", ("loan", "debt"), "has a car loan", "loan fully repaid"),
)  # fmt: skip

MULTI_VALUED: tuple[_Template, ...] = (
    _t("pets", ("pets", "animals"), "cat named Nutmeg", "parrot named Kiwi"),
    _t("pets", "cat", "grey cat called Smudge", "parrot called Mango", newer_key="parrot"),
    _t("pets", ("animals", "pets"), "two goldfish", "a rabbit called Bramble"),
    _t("hobbies", ("hobbies", "hobby"), "pottery", "birdwatching"),
    _t("hobbies", ("hobby", "hobbies"), "knitting", "chess"),
    _t("languages-spoken", ("languages spoken", "languages"), "French", "Swahili"),
    _t("languages-spoken", ("speaks", "languages spoken"), "Arabic", "Hindi"),
    _t("friends", ("friend", "friends"), "Kenji", "Beatriz"),
    _t("friends", ("close friends", "friends"), "Ana from the book club", "Dev from work"),
    _t("allergies", ("allergies", "allergic to"), "peanuts", "shellfish"),
    _t("allergies", ("allergic to", "allergies"), "penicillin", "bee stings"),
    _t("children", ("children", "kids"), "a daughter, Mira", "a son, Teo"),
    _t("children", ("kids", "children"), "son aged 7", "daughter aged 3"),
    _t("countries-visited", ("countries visited", "travel history"), "Morocco", "Vietnam"),
    _t("countries-visited", ("has travelled to", "countries visited"), "Chile", "Iceland"),
    _t("favourite-foods", ("favourite foods", "foods they love"), "dumplings", "mango sticky rice"),
    _t("favourite-foods", "favourite food", "ramen", "tacos"),
    _t("sports-watched", ("sports watched", "sports they follow"), "Formula 1", "basketball"),
    _t("sports-watched", ("follows", "sports watched"), "cricket", "snooker"),
    _t("siblings", ("siblings", "family"), "an older brother", "a younger sister"),
    _t("houseplants", ("houseplants", "plants"), "a monstera", "a fiddle-leaf fig"),
    _t("music", ("music genres", "music taste"), "jazz", "Afrobeat"),
    _t("certifications", ("certifications", "qualifications"), "first aid", "scuba diving"),
)  # fmt: skip

ELABORATION: tuple[_Template, ...] = (
    _t("neighbourhood", "neighbourhood", "Riverside", "has a balcony over the river", newer_key="flat"),
    _t("job-title", "job title", "nurse", "paediatric ward", newer_key="ward"),
    _t("partner", "partner", "Priya", "Priya is a chef", newer_key="partner's job"),
    _t("phone", "phone", "Pixel 8", "green", newer_key="phone case colour"),
    _t("laptop", "laptop", "MacBook Air", "512 GB", newer_key="laptop storage"),
    _t("manager", "manager", "Dana", "Dana used to be an engineer", newer_key="manager's background"),
    _t("gym", "gym", "PulseFit", "Monday and Thursday evenings", newer_key="gym schedule"),
    _t("degree", "degree programme", "computer science", "graph databases", newer_key="thesis topic"),
    _t("training-goal", "training goal", "full marathon", "under four hours", newer_key="target finish time"),
    _t("book", "current book", "The Salt Road", "halfway through", newer_key="reading progress"),
    _t("childs-school", "child's school", "Hillside Primary", "Year 2", newer_key="child's class"),
    _t("desk", "desk location", "third floor by the window", "standing desk with two monitors",
       newer_key="desk setup"),
    _t("hair-colour", "hair colour", "dyed blue", "touched up every six weeks", newer_key="hair dye"),
    _t("bedtime", "bedtime", "around 11 pm", "reads for half an hour first", newer_key="bedtime routine"),
    _t("shift-pattern", "shift pattern", "night shifts", "twelve hours", newer_key="shift length"),
    _t("health", "health status", "recovering from a broken arm", "twice a week", newer_key="physiotherapy"),
    _t("relationship-status", "relationship status", "married", "June 14", newer_key="wedding anniversary"),
    _t("mobile-carrier", "mobile carrier", "Tallis Telecom", "unlimited data", newer_key="phone plan"),
    _t("phone", "phone", "Pixel 8", "Pixel 8 Pro", newer_key="phone model"),
)  # fmt: skip

#: (topic of CHANGE, which of its pairs) the other-person pairs take their two values from
OTHER_FROM_CHANGE: tuple[tuple[str, int], ...] = (
    ("relationship-status", 0), ("partner", 0), ("job-title", 0), ("job-title", 1), ("manager", 0),
    ("neighbourhood", 0), ("phone", 0), ("laptop", 1), ("gym", 0), ("bedtime", 0), ("wake-up-time", 0),
    ("degree", 1), ("book", 0), ("shift-pattern", 0), ("hair-colour", 1), ("training-goal", 0),
    ("tv-series", 1), ("childs-school", 0), ("team", 0), ("bank", 0),
)  # fmt: skip
#: the ENDED templates (by index) whose newer state is said of someone else
OTHER_FROM_ENDED = (0, 2, 4, 6)

SAME_VALUE: tuple[_Template, ...] = (
    _t("job-title", "job title", "nurse", "registered nurse", newer_key="occupation"),
    _t("phone", "phone", "iPhone 15", "an iPhone 15", newer_key="phone model"),
    _t("partner", "partner", "Priya", "Priya", newer_key="girlfriend"),
    _t("bedtime", "bedtime", "11 pm", "around eleven at night", newer_key="usual bedtime"),
    _t("neighbourhood", "neighbourhood", "Riverside", "the Riverside area"),
    _t("manager", "manager", "Dana", "Dana Whitfield", newer_key="boss"),
    _t("shift-pattern", "shift pattern", "night shifts", "works nights", newer_key="work schedule"),
    _t("degree", "study major", "computer science", "CS", newer_key="major"),
    _t("hair-colour", "hair colour", "red", "ginger", newer_key="hair color"),
    _t("training-goal", "training goal", "full marathon", "running a 42 km marathon", newer_key="running goal"),
    _t("gym", "gym", "PulseFit", "member at PulseFit", newer_key="gym membership"),
    _t("relationship-status", "relationship status", "married", "married", newer_key="marital status"),
    _t("laptop", "laptop", "MacBook Air", "an Apple MacBook Air", newer_key="computer"),
    _t("mobile-carrier", "mobile carrier", "Tallis Telecom", "Tallis", newer_key="phone network"),
    _t("childs-school", "daughter's school", "Hillside Primary", "Hillside Primary School"),
    _t("wake-up-time", "wake-up time", "6:30 am", "half past six", newer_key="alarm time"),
    _t("smoking", "smoking", "quit smoking", "non-smoker", newer_key="smoking status"),
    _t("desk", "desk", "desk 14B", "14B", newer_key="desk location"),
    _t("tv-series", "current show", "Low Tide", "still watching Low Tide"),
    _t("book", "current book", "The Salt Road", "still reading The Salt Road", newer_key="book being read"),
    _t("bank", "main bank", "Alder Credit Union", "Alder CU", newer_key="bank"),
    _t("health", "health status", "recovering from a broken arm", "broken arm on the mend", newer_key="injury"),
    _t("allergies", "allergies", "peanuts", "peanut allergy", newer_key="allergic to"),
    _t("renting", "housing", "renting a flat", "rents an apartment", newer_key="living situation"),
    _t("job-title", "job title", "senior nurse", "nurse"),
)  # fmt: skip

UNRELATED: tuple[_Template, ...] = (
    _t("job-title-phone", "job title", "data analyst", "Pixel 7", newer_key="phone"),
    _t("manager-hair", "manager", "Rafael", "dyed blue", newer_key="hair colour"),
    _t("neighbourhood-book", "neighbourhood", "Hillcrest", "Winter Orchard", newer_key="current book"),
    _t("laptop-allergies", "laptop", "Dell XPS 13", "shellfish", newer_key="allergies"),
    _t("bank-training", "main bank", "Fernbrook Savings", "half marathon", newer_key="training goal"),
    _t("gym-degree", "gym", "Iron Works", "economics", newer_key="degree programme"),
    _t("wake-up-tv", "wake-up time", "5 am", "Kingdom of Ash", newer_key="tv series currently watching"),
    _t("partner-desk", "partner", "Jonas", "desk 22A", newer_key="desk location"),
    _t("school-carrier", "child's school", "Northgate Nursery", "Skyline Mobile", newer_key="mobile carrier"),
    _t("project-hobby", "current project", "the warehouse audit", "pottery", newer_key="hobbies"),
    _t("hair-doctor", "hair colour", "blonde", "Dr Moreau", newer_key="family doctor"),
    _t("team-countries", "team at work", "search team", "Vietnam", newer_key="countries visited"),
    _t("degree-pets", "study major", "architecture", "cat named Nutmeg", newer_key="pets"),
    _t("phone-friends", "phone", "Galaxy S22", "Kenji", newer_key="friend"),
    _t("book-internet", "current book", "The Last Cartographer", "Clearwave", newer_key="internet provider"),
    _t("smoking-laptop", "smoking", "smokes", "Framework 13", newer_key="laptop"),
    _t("training-languages", "training goal", "sprint triathlon", "French", newer_key="languages spoken"),
    _t("carrier-manager", "mobile carrier", "Tallis Telecom", "Ms Okafor", newer_key="manager"),
    _t("relationship-bank", "relationship status", "in a relationship", "Alder Credit Union", newer_key="main bank"),
    _t("desk-music", "desk location", "second floor near the kitchen", "jazz", newer_key="music genres"),
    _t("tv-children", "current show", "Dust and Gold", "son aged 7", newer_key="children"),
    _t("allergies-job", "allergies", "bee stings", "senior accountant", newer_key="job title"),
    _t("volunteering-neighbourhood", "volunteering", "helps out at an animal shelter", "Canal Side",
       newer_key="neighbourhood"),
    _t("doctor-hobby", "family doctor", "Dr Haddad", "knitting", newer_key="hobby"),
    _t("shift-bedtime", "shift pattern", "night shifts", "10:30 pm", newer_key="bedtime"),
)  # fmt: skip

#: id (without the -fwd/-rev order) -> why a careful reader could label the pair either way
AMBIGUOUS: dict[str, str] = {
    "change-project-01": "people often run two projects at once; 'current project' suggests one, so likely a change",
    "multi_valued-favourite-foods-02": "a single 'favourite food' could be read as replaced; foods usually add up",
    "elaboration-phone-02": "a more precise name of the same phone or a new phone (an upgrade or a downgrade)",
    "same_value-job-title-02": "'nurse' may be a loose naming of 'senior nurse' or a change of grade",
    "unrelated-shift-bedtime-01": "a 10:30 pm bedtime hints the night shifts stopped, though it is another attribute",
}


# --------------------------------------------------------------------------------------
# generation
class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pairs: list[LabelledPair] = []
        self.numbers: dict[str, int] = {}

    def number(self, category: str, topic: str) -> str:
        """``<category>-<topic>-<nn>``: the next number of that topic in that category."""
        base = f"{category}-{topic}"
        self.numbers[base] = self.numbers.get(base, 0) + 1
        return f"{base}-{self.numbers[base]:02d}"

    def subject(self) -> str:
        return "user" if self.rng.random() < 0.5 else self.rng.choice(NAMES)

    def other(self, subject: str) -> str:
        """Someone else than ``subject``: another named person, or a relative named through the subject."""
        if self.rng.random() < 1 / 3:
            return self.rng.choice([n for n in NAMES if n != subject])
        return f"{subject}'s {self.rng.choice(RELATIVES)}"

    def keys(self, keys: tuple[str, ...]) -> tuple[str, str]:
        """The older and newer claims' keys for one attribute: the same, or a paraphrase about a third of the time."""
        older = keys[0]
        paraphrases = [k for k in keys if k != older]
        if paraphrases and self.rng.random() < PARAPHRASED:
            return older, self.rng.choice(paraphrases)
        return older, older

    def dates(self) -> tuple[date, date]:
        older = START + timedelta(days=self.rng.randint(0, SPAN_DAYS))
        return older, older + timedelta(days=self.rng.randint(*GAP_DAYS))

    def add(self, base: str, order: str, category: str, older: tuple[str, str, str],
            newer: tuple[str, str, str], label: bool) -> None:  # fmt: skip
        """One pair; ``older``/``newer`` are (subject, key, value)."""
        said_old, said_new = self.dates()
        note = AMBIGUOUS.get(base, "")
        self.pairs.append(
            LabelledPair(
                id=f"{base}-{order}", category=category,
                older=Claim(*older, said=said_old), newer=Claim(*newer, said=said_new),
                no_longer_true=label, ambiguous=bool(note), note=note,
            )
        )  # fmt: skip

    def same_subject(self, base: str, order: str, category: str, template: _Template, label: bool) -> None:
        """A pair about one subject: the same attribute (the newer key possibly paraphrased) or the template's
        ``newer_key``; ``order`` "rev" says the template's newer value (under its key) first."""
        who = self.subject()
        old_key, new_key = (template.keys[0], template.newer_key) if template.newer_key else self.keys(template.keys)
        old_value, new_value = template.older, template.newer
        if order == "rev":
            old_value, new_value = new_value, old_value
            if template.newer_key:
                old_key, new_key = new_key, old_key
        self.add(base, order, category, (who, old_key, old_value), (who, new_key, new_value), label)

    def both_orders(self, category: str, template: _Template, label: bool) -> None:
        base = self.number(category, template.topic)
        self.same_subject(base, "fwd", category, template, label)
        self.same_subject(base, "rev", category, template, label)

    def forward(self, category: str, template: _Template, label: bool) -> None:
        self.same_subject(self.number(category, template.topic), "fwd", category, template, label)


def generate(seed: int = 0) -> list[LabelledPair]:
    """The pair set: deterministic for a seed (which picks subjects, dates and key wordings only)."""
    b = _Builder(seed)
    for attribute in CHANGE:
        for older, newer in attribute.pairs:
            template = _Template(attribute.topic, attribute.keys, older, newer)
            (b.both_orders if attribute.reversible else b.forward)("change", template, True)
    for template in ENDED:
        b.forward("ended", template, True)
    for template in MULTI_VALUED:
        b.both_orders("multi_valued", template, False)
    for template in ELABORATION:
        b.both_orders("elaboration", template, False)
    by_topic = {a.topic: a for a in CHANGE}
    others = [_Template(topic, by_topic[topic].keys, *by_topic[topic].pairs[i]) for topic, i in OTHER_FROM_CHANGE]
    others += [ENDED[i] for i in OTHER_FROM_ENDED]
    for template in others:
        who = b.subject()
        old_key, new_key = b.keys(template.keys)
        base = b.number("other_person", template.topic)
        b.add(base, "fwd", "other_person", (who, old_key, template.older), (b.other(who), new_key, template.newer),
              False)  # fmt: skip
    for category, templates in (("same_value", SAME_VALUE), ("unrelated", UNRELATED)):
        for template in templates:
            b.forward(category, template, False)
    return b.pairs


def counts(pairs: Iterable[LabelledPair]) -> dict[str, dict[str, int]]:
    """Per category (in CATEGORIES order): total, positives (label True), negatives, ambiguous (of either label)."""
    out = {c: {"total": 0, "positives": 0, "negatives": 0, "ambiguous": 0} for c in CATEGORIES}
    for pair in pairs:
        row = out.setdefault(pair.category, {"total": 0, "positives": 0, "negatives": 0, "ambiguous": 0})
        row["total"] += 1
        row["positives" if pair.no_longer_true else "negatives"] += 1
        row["ambiguous"] += pair.ambiguous
    return out


def to_json(pair: LabelledPair) -> dict[str, Any]:
    """A pair as a JSON-ready dict (dates as ISO 8601 strings)."""
    out = asdict(pair)
    for side in ("older", "newer"):
        out[side]["said"] = out[side]["said"].isoformat()
    return out


def table(rows: dict[str, dict[str, int]]) -> str:
    """The counts as a plain text table, with a total line."""
    columns = ("total", "positives", "negatives", "ambiguous")
    lines = [f"{'category':<14}" + "".join(f"{c:>11}" for c in columns)]
    for category, row in rows.items():
        lines.append(f"{category:<14}" + "".join(f"{row[c]:>11}" for c in columns))
    lines.append(f"{'all':<14}" + "".join(f"{sum(r[c] for r in rows.values()):>11}" for c in columns))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cognis_dev.pair_set", description=DESCRIPTION)
    p.add_argument("--seed", type=int, default=0, help="the RNG seed (subjects, dates, key wordings); default 0")
    p.add_argument("--dump", type=Path, help="write the pairs to this file as JSON lines")
    args = p.parse_args(argv)
    pairs = generate(args.seed)
    print(table(counts(pairs)))
    if args.dump is not None:
        with args.dump.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(to_json(pair), ensure_ascii=False) + "\n" for pair in pairs)
        print(f"wrote {len(pairs)} pairs to {args.dump}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
