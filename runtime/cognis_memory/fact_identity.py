"""What an extracted fact is about: its subject (a person) and its attribute (in the extraction model's
words), how two of them are compared, and the fact's text.

An extraction model names each fact's subject, attribute and value ("Maya", "home city", "Lisbon");
the text stored and searched is written here from the three ("Maya's home city: Lisbon"), so no fact
reads in the first person, copies a listed memory or carries a relative date the model failed to
resolve. Ingest uses the comparison to choose which stored facts a new one may replace; retrieval
uses it to put the newest of a subject's facts about one attribute first for a present-state
question. Both compare the normalised forms below, never the raw strings.
"""

from __future__ import annotations

import re

from .domain import Memory, MemoryKind

#: What a model writes for the person who wrote the message ("I", "the user", "speaker", ...).
_SELF = frozenset({"i", "me", "myself", "user", "the user", "speaker", "the speaker", "writer", "author", "self"})
#: Words in front of an attribute that say "the present one"; "current job" and "job" are one attribute.
_PRESENT = re.compile(r"^(?:current|present|new|latest|now)\s+")
#: "my sister", "the user's sister", "speaker's sister": someone named through the speaker.
_OWNED_BY_SELF = re.compile(r"^(?:my|(?:the\s+)?(?:user|speaker)['’]s)\s+(.+)$", re.IGNORECASE)
_NON_WORD = re.compile(r"[^\w\s]+")
_SPACES = re.compile(r"\s+")


def _plain(text: str) -> str:
    return _SPACES.sub(" ", _NON_WORD.sub(" ", text.lower())).strip()


def normal_subject(subject: str, speaker: str) -> str:
    """The subject as stored: the speaker's own name for a self-reference ("I", "user", "speaker", or the
    speaker's name in any case), "my sister" as "<speaker>'s sister", anyone else as written (trimmed).
    ``speaker`` is the message's speaker (a name, or the role, "user", when it has none)."""
    text = " ".join(subject.split()).strip(" .,:;\"'")
    plain = _plain(text)
    if not plain or plain in _SELF or plain == _plain(speaker):
        return speaker
    owned = _OWNED_BY_SELF.match(text)
    if owned:
        return f"{speaker}'s {owned.group(1)}"
    return text


def normal_attribute(attribute: str) -> str:
    """The attribute as compared: lower case, punctuation and spacing removed, "current"/"new" in front
    dropped ("Current job" and "job" are one attribute; "previous job" is another)."""
    return _PRESENT.sub("", _plain(attribute))


def same_subject(a: str | None, b: str | None) -> bool:
    """Whether two stored subjects name the same person (case and punctuation aside)."""
    return a is not None and b is not None and _plain(a) == _plain(b)


def same_attribute(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and normal_attribute(a) == normal_attribute(b)


#: Words that carry no value of their own (in a value, or when checking it against the message).
_FILLER = frozenset(
    "a an the and or of to in on at for with by from is are was were be been being it its this that these those "
    "their his her my our your i me we he she they them not no yes very really so just also".split()
)
#: Values that say nothing ("not specified"): a small model fills every attribute it can think of with them.
_NO_VALUE = frozenset(
    {
        "",
        "unknown",
        "not specified",
        "unspecified",
        "none",
        "n a",
        "na",
        "not mentioned",
        "not stated",
        "not given",
        "not provided",
        "not applicable",
        "null",
        "nothing",
        "not",
        "no",
        "yes",
        "true",
        "false",
    }
)


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry meaning (lower case, filler words left out)."""
    return {w for w in _plain(text).split() if w not in _FILLER}


def same_value(a: str, b: str) -> bool:
    """The same value, or one saying no more than the other ("fan is loud" / "laptop fan is really loud")."""
    if _plain(a) == _plain(b):
        return True
    wa, wb = content_words(a), content_words(b)
    return bool(wa) and bool(wb) and (wa <= wb or wb <= wa)


def says_nothing(value: str) -> bool:
    """A value that states nothing ("not specified", "unknown", "none")."""
    return _plain(value) in _NO_VALUE


def grounded(value: str, said: str) -> bool:
    """Whether a value is drawn from what was said: one of its meaningful words (3 letters or more, or a
    number) occurs in ``said``, allowing for endings ("practises" / "practising"). A value no word of which
    was said ("musician" from "I went to a great concert") is the model's guess, not the message's fact."""
    heard = _plain(said).split()
    for w in content_words(value):
        if w.isdigit() or len(w) >= 3:
            stem = w[:5] if len(w) >= 6 else w
            if any(h.startswith(stem) for h in heard):
                return True
    return False


def fact_text(subject: str, attribute: str, value: str) -> str:
    """The stored text of a fact: "Maya's home city: Lisbon"; a subject that is a role ("user") reads
    "The user's ..."."""
    who = "The user" if _plain(subject) == "user" else subject
    owner = f"{who}'" if who.endswith("s") and not who.endswith("'s") else f"{who}'s"
    return f"{owner} {attribute.strip()}: {value.strip()}"


def attribute_of(memory: Memory) -> tuple[str, str] | None:
    """(subject, normalised attribute) of a current extracted fact that has both, else None."""
    if memory.kind is not MemoryKind.FACT or not memory.subject or not memory.attribute:
        return None
    return _plain(memory.subject), normal_attribute(memory.attribute)
