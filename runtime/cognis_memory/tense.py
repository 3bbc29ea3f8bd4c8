"""The tense of the clause around a span of text: past, future or none, read from the nearest verb cue.

:mod:`cognis_memory.timeexpr` asks it where a date has no year ("in May", "on Friday"): the tense
places the date before or after the reference time. Cues are words and word pairs ("will", "going
to", "moved", "have been", "I'm getting ..."); a clause ends at punctuation and at a conjunction.
Habits ("usually", "every") are told apart, since "every Friday" is no date.
"""

from __future__ import annotations

import bisect
import re
from typing import Literal

Tense = Literal["past", "future"]

_FUTURE_WORDS = {
    "will", "'ll", "shall", "gonna", "wanna", "gotta", "plan", "plans", "planning", "hope", "hopes",
    "hoping", "intend", "intends", "want", "wants", "might", "should", "must", "would", "wouldn",
    "upcoming", "soon", "supposed", "due", "scheduled", "expect", "expecting", "tomorrow",
}  # fmt: skip
_PAST_WORDS = {
    "was", "were", "wasn", "weren", "did", "didn", "had", "hadn", "ago", "went", "came", "saw",
    "got", "made", "took", "gave", "met", "left", "bought", "began", "broke", "brought", "built",
    "caught", "chose", "drove", "ate", "fell", "felt", "found", "flew", "forgot", "heard", "held",
    "kept", "knew", "lost", "paid", "ran", "said", "sold", "sent", "spent", "stood", "swam",
    "taught", "told", "thought", "threw", "understood", "woke", "won", "wore", "wrote", "sat",
    "slept", "spoke", "became", "grew", "hung", "quit", "learnt", "burnt", "dreamt", "split",
    "hurt", "shut", "rode", "drank", "sang", "led", "fed", "fought", "dug", "hid", "lit", "slid",
    "stole", "struck", "swore", "tore", "froze", "born", "yesterday",
}  # fmt: skip
# Future cues made of two words: "let's", "can't wait", "won't".
_FUTURE_AFTER = {("'s", "let"), ("wait", "n't"), ("wait", "can"), ("wait", "cannot")}
_FUTURE_BEFORE = {("won", "n't"), ("won", "'t")}
# Present-tense verbs of timetables ("the course starts in March") read as future.
_SCHEDULED = {
    "start", "starts", "begin", "begins", "end", "ends", "open", "opens", "close", "closes", "leave",
    "leaves", "arrive", "arrives", "finish", "finishes", "land", "lands", "depart", "departs",
    "return", "returns", "expire", "expires", "run", "runs", "come", "comes", "go", "goes", "turn",
    "turns", "fly", "flies", "get", "gets", "move", "moves", "is", "are", "am", "'m", "'re", "isn",
    "aren", "'s",
}  # fmt: skip
# Who a bare present verb follows when it is a verb ("they leave", "the results come"), not a noun
# ("sick leave", "a good run").
_SUBJECTS = {"i", "we", "you", "they"}
_BE_PRESENT = {"am", "'m", "is", "'s", "are", "'re"}
# "'s" is "is" after these ("it's my birthday"); after a noun it is a possessive ("Friday night's game").
_IS_AFTER = {"it", "he", "she", "that", "there", "what", "who", "where", "here", "this"}
_BE_GET = _BE_PRESENT | {"be", "being", "been", "get", "gets", "getting", "got", "was", "were"}
_HAVE = {"have", "has", "'ve"}
_NOT_VERBS_ING = {
    "thing", "something", "nothing", "anything", "everything", "morning", "evening", "spring",
    "during", "king", "ring", "wedding", "building", "meeting", "ceiling", "amazing", "interesting",
    "exciting", "boring", "annoying", "surprising", "relaxing", "stunning", "charming", "tiring",
    "exhausting", "fascinating", "frustrating", "overwhelming", "terrifying", "shocking", "missing",
    "willing", "outstanding", "upcoming", "ongoing", "feeling", "birthday", "thanksgiving",
}  # fmt: skip
_NOT_VERBS_ED = {
    "need", "feed", "seed", "speed", "bed", "red", "shed", "bleed", "breed", "indeed", "exceed",
    "proceed", "succeed", "hundred", "sacred", "naked", "wicked", "kindred", "wed", "weed", "ted",
    "fred", "ned", "bored", "tired", "excited", "scared", "married", "engaged", "interested",
    "supposed", "used",
}  # fmt: skip
# Words that neither carry nor block a tense between an auxiliary and its verb.
_ADVERBS = {"not", "n't", "'t", "still", "really", "finally", "also", "just", "already", "so", "all",
            "never", "ever", "probably", "definitely", "actually", "even", "always", "only"}  # fmt: skip
_MODALS = {"will", "'ll", "would", "'d", "could", "can", "should", "must", "might", "may", "to", "did",
           "didn", "do", "does", "don", "doesn", "shall", "wo", "won", "let", "gonna", "wanna"}  # fmt: skip
_CLAUSE_BREAK = re.compile(r"[,:;()\"]|\s(?:and|but|so|because|although|though|while|whereas|or)\s")
_SENTENCE_BREAK = re.compile(r"[.!?\n]+(?:\s|$)")
_HABITUAL = re.compile(r"\b(?:usually|typically|always|often|generally|normally|every|each|tradition)\b")
_TOKEN = re.compile(r"[a-z]+|'[a-z]+")


def _tokens(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for m in _TOKEN.finditer(text):
        word = m.group(0)
        if word == "'t" and out and out[-1][1].endswith("n"):  # "didn't" -> "didn" + "'t"
            word = "n't"
        out.append((m.start(), word))
    return out


def _prev(tokens: list[tuple[int, str]], i: int, skip: int = 0) -> str:
    """The nearest word before ``tokens[i]`` that is not a filler adverb (``skip`` more back)."""
    j = i - 1
    while j >= 0:
        if tokens[j][1] not in _ADVERBS:
            if skip == 0:
                return tokens[j][1]
            skip -= 1
        j -= 1
    return ""


# Every word that can be a cue by itself or as the head of a pair (the rest end in -ing or -ed).
_CUE_WORDS = (
    _FUTURE_WORDS
    | _PAST_WORDS
    | _SCHEDULED
    | _HAVE
    | {"going", "used", "'d", "'s", "wait", "won", "been", "done"}
    | {"gone", "seen"}
)


def _cues(tokens: list[tuple[int, str]]) -> list[tuple[int, Tense]]:
    """(position, tense) of each word that places the clause in the past or the future."""
    out: list[tuple[int, Tense]] = []
    for i, (pos, w) in enumerate(tokens):
        if w not in _CUE_WORDS and not w.endswith(("ing", "ed")):  # most words: no cue
            continue
        prev = _prev(tokens, i)
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if w == "going" and nxt == "to":
            out.append((pos, "past" if prev in ("was", "were", "wasn", "weren") else "future"))
        elif w in ("used", "had") and nxt == "to":
            out.append((pos, "past"))
        elif w in _HAVE and nxt == "to":
            out.append((pos, "future"))
        elif w == "'d":
            out.append((pos, "future" if nxt in ("like", "love", "prefer", "rather", "better") else "past"))
        elif w in _FUTURE_WORDS or (w, prev) in _FUTURE_AFTER or (w, nxt) in _FUTURE_BEFORE:
            out.append((pos, "future"))
        elif w == "got" and (prev in _HAVE or _prev(tokens, i, 1) in _HAVE):
            continue  # "have you got", "I've got": a possession now, no past
        elif w in _PAST_WORDS and prev not in _MODALS and prev not in _BE_GET:  # not "will be held"
            out.append((pos, "past"))
        elif len(w) > 4 and w.endswith("ing") and w not in _NOT_VERBS_ING:
            inverted = prev in _SUBJECTS and _prev(tokens, i, 1) in _BE_PRESENT  # "are you coming"
            if prev in _BE_PRESENT or inverted or i == 0:  # "I'm moving", "Moving in May!"
                out.append((pos, "future"))
        elif len(w) > 3 and w.endswith("ed") and w not in _NOT_VERBS_ED and not w.endswith("eed"):
            if prev not in _BE_GET and prev not in _MODALS:  # "is booked" is a state, not a past
                out.append((pos, "past"))
        elif w in ("been", "done", "gone", "seen") and prev in _HAVE and not nxt.endswith("ing"):
            # "I've been to Rome": past; "I've been thinking about going in October" places nothing
            out.append((pos, "past"))
        elif (
            w in _SCHEDULED
            and (
                w in ("am", "is", "are")
                or (w.endswith("s") and not w.startswith("'"))
                or w in ("'m", "'re")
                or (w == "'s" and prev in _IS_AFTER)
                or prev in _SUBJECTS
                or (prev.endswith("s") and len(prev) > 3)
            )
            and prev not in _MODALS
            and _prev(tokens, i, 1) not in _MODALS  # "did you get", "will we move": the auxiliary decides
            and not (w in _BE_PRESENT and nxt.endswith("ing"))
        ):
            out.append((pos, "future"))
    return out


class ClauseTenses:
    """The tense cues of one text, found once, and the tense around any span of it.

    Cues, sentence breaks and clause breaks are each found in one pass; a span's clause and its
    nearest cue are then looked up by bisection, so a long message costs linear time.
    """

    def __init__(self, text: str) -> None:
        self.cues = _cues(_tokens(text))
        self.cue_pos = [p for p, _ in self.cues]
        self.sentences = [(m.start(), m.end()) for m in _SENTENCE_BREAK.finditer(text)]
        self.clauses = [(m.start(), m.end()) for m in _CLAUSE_BREAK.finditer(text)]
        self.size = len(text)
        self.habits = [m.start() for m in _HABITUAL.finditer(text)]

    def _bounds(self, breaks: list[tuple[int, int]], a: int, b: int) -> tuple[int, int]:
        """From the end of the last break before ``a`` to the start of the first after ``b``."""
        i = bisect.bisect_right(breaks, (a, self.size + 1))  # breaks starting at or before a
        lo = next((e for s, e in reversed(breaks[max(0, i - 2) : i]) if e <= a), 0)
        j = bisect.bisect_left(breaks, (b, -1))
        hi = breaks[j][0] if j < len(breaks) else self.size
        return lo, hi

    def _nearest(self, lo: int, hi: int, a: int, b: int) -> Tense | None:
        before = bisect.bisect_left(self.cue_pos, a) - 1
        after = bisect.bisect_left(self.cue_pos, b)
        best: tuple[int, Tense] | None = None
        if before >= 0 and self.cue_pos[before] >= lo:
            best = (a - self.cue_pos[before], self.cues[before][1])
        if after < len(self.cues) and self.cue_pos[after] < hi:
            dist = self.cue_pos[after] - b
            if best is None or dist < best[0]:
                best = (dist, self.cues[after][1])
        return best[1] if best else None

    def habitual(self, a: int, b: int) -> bool:
        """Whether the clause around ``[a, b)`` speaks of a habit ("usually", "every", ...)."""
        s_lo, s_hi = self._bounds(self.sentences, a, b)
        c_lo, c_hi = self._bounds(self.clauses, a, b)
        i = bisect.bisect_left(self.habits, max(s_lo, c_lo))
        return i < len(self.habits) and self.habits[i] < min(s_hi, c_hi)

    def around(self, a: int, b: int) -> Tense | None:
        """The tense of the cue nearest ``[a, b)`` in its clause, else in its sentence."""
        s_lo, s_hi = self._bounds(self.sentences, a, b)
        c_lo, c_hi = self._bounds(self.clauses, a, b)
        return self._nearest(max(s_lo, c_lo), min(s_hi, c_hi), a, b) or self._nearest(s_lo, s_hi, a, b)
