"""The project's knowledge-update set: synthetic users whose attributes change across chat sessions.

Generated here from the project's own templates (no outside data): many synthetic users, each telling
an assistant about themselves over several chat sessions months apart. Each user has a few attributes
(home, employer, diet, pet, car, ...); some change once or twice across sessions, the others never
change. The statement of a new value is phrased differently from the old one ("I live in Porto" ...
"we finally moved to Lisbon"), sessions of unrelated chat sit between them, and distractor turns
mention the same kind of thing about other people. Half of the users speak under their own name (a
speaker such as ``Maya``); the other half are plain ``user``/``assistant`` turns.

Used by ``scripts/bench_updates.py`` (the benchmark), the CI quality gate
(``tests/bench/test_quality_gate.py``) and :mod:`cognis_dev.update_oracle` (an extraction LLM that
answers from this set's ground truth). The runtime knows nothing of these templates.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cognis_memory.domain import Memory, MemoryKind
from cognis_memory.service import MemoryService

from .bench_common import message_body

#: ``MessageBody``, or ``MessageIn`` in a runtime from before it (bench_updates.py run on an older checkout)
MessageBody = message_body()

TENANT = "bench-updates"
KINDS = ("current", "previous", "unchanged")


# --------------------------------------------------------------------------------------
# templates: {v} = the value, {o} = the value it replaces; questions use {who} ("I"/"Maya"),
# {do} ("do"/"does"), {my} ("my"/"Maya's"), {am} ("am I"/"is Maya"), {was} ("was I"/"was Maya")
@dataclass(frozen=True)
class Attribute:
    name: str
    values: tuple[str, ...]
    first: tuple[str, ...]  # statements of the first value
    change: tuple[str, ...]  # statements of a new value (may mention the old one)
    current: tuple[str, ...]  # questions about the present value
    previous: tuple[str, ...]  # questions about the value before the last change
    others: tuple[str, ...]  # the same kind of thing said about someone else (distractors)


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        "home",
        ("Porto", "Lisbon", "Valencia", "Lyon", "Leipzig", "Krakow", "Ghent", "Bologna", "Tampere", "Bilbao",
         "Utrecht", "Graz"),
        ("I live in {v}, in a tiny flat near the old town.",
         "Rent in {v} keeps climbing, but I love living here.",
         "Home for me is {v}; I've been here since university."),
        ("Big news: we moved to {v} last weekend, still unpacking boxes!",
         "After years in {o} I finally packed up and settled in {v}.",
         "Just got the keys to our new apartment in {v}, the move went smoothly."),
        ("Where do {who} live now?", "Which city {do} {who} live in these days?", "Where {do} {who} live?",
         "What city is home for {me} at the moment?"),
        ("Where did {who} live before?", "Which city did {who} use to live in?",
         "Where was {who} living previously?"),
        ("My cousin just moved to {v} for a job.", "A friend of mine lives in {v} and loves it.",
         "My brother's flat in {v} has a great view."),
    ),
    Attribute(
        "employer",
        ("Northwind Analytics", "Bluefin Robotics", "Cedar Health", "Orbital Foods", "Lumen Insurance",
         "Harbor Freightways", "Quill Publishing", "Tessellate Games", "Brightwater Energy", "Copperleaf Bank"),
        ("I work as a data engineer at {v}.", "My job at {v} keeps me busy with endless meetings.",
         "I've been on the platform team at {v} for two years."),
        ("Today was my first day at {v}!", "I accepted the offer from {v} and handed in my notice.",
         "I left {o} and joined {v} this month, the new team is lovely."),
        ("Where {do} {who} work now?", "Who is {my} current employer?", "Which company {do} {who} work for?"),
        ("Where did {who} work before?", "Which company did {who} use to work for?",
         "Who was {my} previous employer?"),
        ("My sister got hired at {v} last year.", "My neighbour complains about his boss at {v}.",
         "A college friend is interviewing at {v}."),
    ),
    Attribute(
        "diet",
        ("vegetarian", "vegan", "pescatarian", "on a keto diet", "gluten-free", "on a low-carb diet",
         "dairy-free"),
        ("I'm {v}, so I always check the menu first.", "Being {v} makes restaurant nights tricky sometimes.",
         "I've been {v} for years and I don't miss anything."),
        ("I've decided to go {v} starting this month.", "Switched things up: I'm {v} now and feel great.",
         "My doctor suggested a change, so I'm {v} these days instead of {o}."),
        ("What diet {do} {who} follow now?", "What kind of diet {am} on?", "How {do} {who} eat these days?"),
        ("What diet did {who} follow before?", "What was {my} diet previously?",
         "How did {who} use to eat?"),
        ("My roommate is {v} and cooks amazing dinners.", "My dad tried being {v} for a month.",
         "Half of my book club is {v}."),
    ),
    Attribute(
        "pet",
        ("Biscuit", "Pepper", "Luna", "Milo", "Rocky", "Nala", "Otis", "Juniper", "Ziggy", "Hazel", "Waffles",
         "Clementine"),
        ("My dog {v} loves chasing the neighbour's cat.", "I walk {v}, my beagle, every morning before work.",
         "{v} my terrier chewed through another sofa cushion."),
        ("We adopted a rescue puppy this week and named her {v}.",
         "Meet {v}, the new four-legged member of our family!",
         "It's been hard since {o} passed away, but little {v} is cheering us up."),
        ("What is {my} dog's name?", "What is {my} dog called now?", "What's the name of {my} dog these days?"),
        ("What was {my} previous dog called?", "What was the name of the dog {who} had before?",
         "Which dog did {who} use to have?"),
        ("My aunt's dog {v} is such a good boy.", "The neighbours got a corgi called {v}.",
         "At the park I met a husky named {v}."),
    ),
    Attribute(
        "car",
        ("a red Toyota Corolla", "a blue Honda Civic", "a grey Volkswagen Golf", "a white Tesla Model 3",
         "a green Subaru Outback", "a black Mazda 3", "a silver Ford Focus", "a yellow Fiat 500"),
        ("I drive {v}, it's old but reliable.", "My car is {v} and it just passed inspection.",
         "Parking {v} downtown is always a nightmare."),
        ("Traded in the old car, I'm now driving {v}!", "Picked up {v} from the dealer yesterday, so happy.",
         "Sold {o} and bought {v} instead."),
        ("What car {do} {who} drive now?", "What car {do} {who} have?", "Which car {do} {who} drive these days?"),
        ("What car did {who} drive before?", "Which car did {who} use to have?", "What was {my} previous car?"),
        ("My colleague just bought {v}.", "My mum drives {v} everywhere.", "I rented {v} on holiday once."),
    ),
    Attribute(
        "exercise",
        ("bouldering", "lap swimming", "road cycling", "trail running", "hot yoga", "rowing", "kickboxing",
         "tennis", "pilates"),
        ("My workout routine is {v} three times a week.", "Nothing clears my head like {v} after work.",
         "I've been doing {v} to stay in shape."),
        ("I gave up {o} and I'm totally hooked on {v} now.", "These days you'll find me doing {v} most evenings.",
         "Signed up for a {v} membership and it's my new routine."),
        ("What {do} {who} do for exercise now?", "What is {my} workout these days?",
         "How {do} {who} stay fit?"),
        ("What did {who} do for exercise before?", "What was {my} old workout routine?",
         "How did {who} use to stay fit?"),
        ("My partner is training for a {v} competition.", "A coworker keeps inviting me to {v}.",
         "I watched a {v} tournament on TV."),
    ),
    Attribute(
        "commute",
        ("by train", "by bike", "by bus", "on foot", "by scooter", "by car", "by ferry", "by tram"),
        ("I get to work {v}, it takes about half an hour.", "My commute is {v}, which I honestly enjoy.",
         "Going to the office {v} gives me time to think."),
        ("I've started commuting {v} and it's so much better.", "No more going {o}: I travel {v} now.",
         "Switched my commute, I go {v} from this week on."),
        ("How {do} {who} get to work now?", "How {do} {who} commute these days?", "How {do} {who} get to the office?"),
        ("How did {who} use to get to work?", "How did {who} commute before?",
         "What was {my} old way of getting to the office?"),
        ("My flatmate goes to work {v}.", "Most of my team travels {v}.", "My boss arrives {v} every day."),
    ),
    Attribute(
        "language",
        ("Spanish", "Japanese", "Portuguese", "German", "Korean", "Italian", "Dutch", "Greek", "Polish"),
        ("I'm learning {v} on my lunch breaks.", "My {v} lessons are on Tuesday evenings.",
         "I practise {v} with an app every night."),
        ("I dropped my old course and started {v} classes instead.",
         "New challenge: I've begun studying {v}!", "Enough {o} for now, I'm picking up {v}."),
        ("Which language {am} learning now?", "What language {do} {who} study these days?",
         "Which language {am} studying?"),
        ("Which language was {who} learning before?", "What language did {who} use to study?",
         "Which language {was} studying previously?"),
        ("My niece is learning {v} at school.", "Our new neighbours speak {v} at home.",
         "I heard a podcast in {v} today."),
    ),
    Attribute(
        "drink",
        ("oat flat whites", "green tea", "double espressos", "chai lattes", "cold brew", "hot chocolate",
         "matcha", "rooibos tea"),
        ("My morning drink is always {v}.", "I can't start the day without {v}.",
         "The café downstairs knows my order: {v}."),
        ("Lately I've switched to {v} in the mornings.", "I've cut out {o}; it's {v} for me now.",
         "My new morning ritual is {v}."),
        ("What {do} {who} drink in the mornings now?", "What is {my} go-to morning drink?",
         "What {do} {who} usually drink to start the day?"),
        ("What did {who} use to drink in the mornings?", "What was {my} morning drink before?",
         "Which drink did {who} have in the mornings previously?"),
        ("My boss drinks {v} all day.", "The office kitchen ran out of {v}.", "My friend swears by {v}."),
    ),
    Attribute(
        "instrument",
        ("piano", "guitar", "cello", "drums", "violin", "ukulele", "saxophone", "trumpet", "harp"),
        ("I'm taking {v} lessons every Saturday.", "I practise the {v} for an hour most evenings.",
         "Playing the {v} is how I unwind."),
        ("I sold my {o} and bought a {v} last week.", "New hobby alert: I've started playing the {v}!",
         "My teacher convinced me to switch to the {v}."),
        ("Which instrument {do} {who} play now?", "What instrument {am} learning these days?",
         "What instrument {do} {who} play?"),
        ("Which instrument did {who} play before?", "What instrument did {who} use to play?",
         "Which instrument was {who} learning previously?"),
        ("My nephew plays the {v} in the school band.", "There was a street musician with a {v} today.",
         "My neighbour practises the {v} at night."),
    ),
)  # fmt: skip

#: Chat turns about nothing the questions ask: the user's side and the assistant's replies.
CHITCHAT_USER = (
    "Can you suggest a quick recipe for a weeknight dinner?", "The weather has been so grey all week.",
    "I watched a documentary about octopuses last night, fascinating.", "Any tips for sleeping better?",
    "I need to buy a birthday present for my friend, any ideas?", "Work was stressful today, lots of deadlines.",
    "What's a good book to read on a long flight?", "I'm trying to drink more water during the day.",
    "My phone battery dies so fast lately.", "I spent the afternoon reorganising my bookshelf.",
    "Do you know any good board games for four people?", "I finally finished that jigsaw puzzle.",
    "Can you help me plan a budget for next month?", "I keep forgetting to water my plants.",
    "We had a power cut in the building this morning.", "I'm thinking about learning to bake bread.",
    "What's the difference between baking soda and baking powder?", "My laptop fan is really loud.",
    "I went to a great concert on Friday.", "Could you explain how compound interest works?",
    "I'm hosting a small dinner party on Saturday.", "I just started a new TV series about detectives.",
    "How do I get rid of fruit flies in the kitchen?", "I need a packing list for a weekend trip.",
    "My friend recommended a podcast about history.", "I cleaned out the garage, so much stuff.",
    "Can you give me ideas for a rainy Sunday?", "I tried a new pasta place downtown.",
    "What should I write in a thank-you card?", "I'm getting a cold, I think.",
)  # fmt: skip
CHITCHAT_ASSISTANT = (
    "That sounds like a good plan!", "Happy to help with that.", "Here are a few ideas you could try.",
    "That's great to hear.", "Sorry to hear that, I hope it gets better soon.", "Good question, let me explain.",
    "Thanks for sharing that with me.", "That sounds lovely.", "Let me know how it goes!",
    "Interesting, tell me more.", "I'd be glad to help you plan it.", "Nice, enjoy it!",
)  # fmt: skip
NAMES = ("Maya", "Tomas", "Aiko", "Ruben", "Lena", "Omar", "Ines", "Kofi", "Sara", "Viktor", "Noor", "Pablo",
         "Greta", "Idris", "Yuki", "Hana")  # fmt: skip


# --------------------------------------------------------------------------------------
# generated data
@dataclass
class Turn:
    id: str  # client_message_id
    role: str
    content: str
    time: str  # ISO 8601
    session: str
    states: list[str] = field(default_factory=list)  # "attribute=value" this turn states about the user
    others: list[str] = field(default_factory=list)  # "attribute=value" this turn states about someone else


@dataclass
class QuestionItem:
    kind: str  # current | previous | unchanged
    attribute: str
    text: str
    gold: list[str]  # turn ids stating the asked value
    stale: list[str]  # current questions: turn ids stating an older value (and not the newest)


@dataclass
class UserHistory:
    user_id: str
    name: str | None  # the user's speaker name, or None for plain role turns
    turns: list[Turn]
    questions: list[QuestionItem]
    now: str  # ISO 8601: when the questions are asked


def _person(name: str | None) -> dict[str, str]:
    if name is None:
        return {"who": "I", "do": "do", "my": "my", "me": "me", "am": "am I", "was": "was I"}
    return {"who": name, "do": "does", "my": f"{name}'s", "me": name, "am": f"is {name}", "was": f"was {name}"}


def _question(rng: random.Random, forms: Sequence[str], name: str | None) -> str:
    text = rng.choice(forms).format(**_person(name))
    return text[0].upper() + text[1:]


def generate(users: int, seed: int = 1) -> list[UserHistory]:
    """``users`` synthetic histories, deterministic for a seed."""
    rng = random.Random(seed)
    out = []
    for u in range(users):
        name = NAMES[u % len(NAMES)] if u % 2 == 1 else None
        attrs = rng.sample(ATTRIBUTES, 5)
        changing, steady = attrs[:3], attrs[3:]
        plan: dict[str, list[str]] = {}  # attribute -> values in order
        for a in attrs:
            n_values = 1 if a in steady else rng.choice((2, 2, 3))
            plan[a.name] = rng.sample(a.values, n_values)
        n_sessions = 9
        start = datetime(2023, 1, 1, 9, tzinfo=UTC) + timedelta(days=rng.randrange(0, 120))
        times = []
        t = start
        for _ in range(n_sessions):
            times.append(t)
            t += timedelta(days=rng.randrange(6, 25), hours=rng.randrange(0, 10))
        # session index of each statement: first values in sessions 0-2, changes later, at least two
        # sessions apart (unrelated chat sits between them)
        events: dict[int, list[tuple[Attribute, str, str | None]]] = {i: [] for i in range(n_sessions)}
        for a in attrs:
            values = plan[a.name]
            s = rng.randrange(0, 3)
            events[s].append((a, values[0], None))
            for prev, new in zip(values, values[1:], strict=False):
                s = min(n_sessions - 1, s + rng.randrange(2, 4))
                events[s].append((a, new, prev))
        turns: list[Turn] = []
        value_turns: dict[tuple[str, str], list[str]] = {}
        for si in range(n_sessions):
            sid = f"s{si + 1}"
            lines: list[tuple[str, str, list[str], list[str]]] = []  # role, text, states, others
            for _ in range(rng.randrange(2, 4)):
                lines.append(("user", rng.choice(CHITCHAT_USER), [], []))
                lines.append(("assistant", rng.choice(CHITCHAT_ASSISTANT), [], []))
            for a, value, old in events[si]:
                forms = a.change if old is not None else a.first
                if old is None:
                    forms = tuple(f for f in forms if "{o}" not in f)
                text = rng.choice(forms).format(v=value, o=old or "")
                at = rng.randrange(0, len(lines) + 1) // 2 * 2
                lines[at:at] = [("user", text[0].upper() + text[1:], [f"{a.name}={value}"], []),
                                ("assistant", rng.choice(CHITCHAT_ASSISTANT), [], [])]  # fmt: skip
            if rng.random() < 0.6:  # a distractor: the same kind of thing about someone else
                a = rng.choice(ATTRIBUTES)
                other = rng.choice([v for v in a.values if v not in plan.get(a.name, ())])
                at = rng.randrange(0, len(lines) + 1) // 2 * 2
                lines[at:at] = [("user", rng.choice(a.others).format(v=other), [], [f"{a.name}={other}"]),
                                ("assistant", rng.choice(CHITCHAT_ASSISTANT), [], [])]  # fmt: skip
            for ti, (role, text, states, others) in enumerate(lines):
                tid = f"u{u:03d}-{sid}-t{ti:02d}"
                at_time = (times[si] + timedelta(minutes=2 * ti)).isoformat()
                turns.append(Turn(tid, role, text, at_time, sid, states, others))
                for st in states:
                    attr, value = st.split("=", 1)
                    value_turns.setdefault((attr, value), []).append(tid)
        questions = []
        for a in changing:
            values = plan[a.name]
            stale = [tid for v in values[:-1] for tid in value_turns[(a.name, v)]]
            newest = [tid for tid in value_turns[(a.name, values[-1])]]
            stale = [tid for tid in stale if tid not in newest]
            questions.append(QuestionItem("current", a.name, _question(rng, a.current, name), newest, stale))
            questions.append(QuestionItem("previous", a.name, _question(rng, a.previous, name),
                                          list(value_turns[(a.name, values[-2])]), []))  # fmt: skip
        for a in steady:
            questions.append(QuestionItem("unchanged", a.name, _question(rng, a.current, name),
                                          list(value_turns[(a.name, plan[a.name][0])]), []))  # fmt: skip
        now = times[-1] + timedelta(days=2)
        out.append(UserHistory(f"user{u:03d}", name, turns, questions, now.isoformat()))
    return out


# --------------------------------------------------------------------------------------
# ingest and scoring
@dataclass
class IngestReport:
    """What ingesting the histories did: per user, message id -> turn id (from the ingest responses,
    never from text); per session batch, the extraction counts the service answered with and the
    seconds the batch took."""

    maps: dict[str, dict[str, str]] = field(default_factory=dict)
    batches: list[dict[str, Any]] = field(default_factory=list)

    def add_batch(self, user: str, messages: int, seconds: float, result: Any) -> None:
        """One add request's outcome (``result``: the service's ``IngestResult``), as :func:`llm_summary` reads it."""
        self.batches.append({"user": user, "messages": messages, "seconds": seconds,
                             "extraction": dict(result.extraction), "job": result.job.id if result.job else None})  # fmt: skip


async def ingest(
    svc: MemoryService, histories: list[UserHistory], *, tenant: str = TENANT, concurrency: int = 1
) -> IngestReport:
    """Every turn one message (speaker = the user's name on user turns of named users), one request
    per session (synchronous mode: with an extraction LLM, its facts are written before the next).
    ``concurrency`` users are ingested at once (each user's sessions in order): a local LLM server with
    as many slots answers them side by side. Users share nothing, so the stored result is the same."""
    report = IngestReport()
    gate = asyncio.Semaphore(concurrency)

    async def one_user(h: UserHistory) -> None:
        async with gate:
            report.maps[h.user_id] = {}
            by_session: dict[str, list[Turn]] = {}
            for t in h.turns:
                by_session.setdefault(t.session, []).append(t)
            for turns in by_session.values():
                msgs = [
                    MessageBody(
                        content=t.content,
                        role=t.role,
                        speaker=h.name if (h.name and t.role == "user") else None,
                        timestamp=datetime.fromisoformat(t.time),
                        session_id=t.session,
                        client_message_id=t.id,
                    )
                    for t in turns
                ]
                t0 = time.perf_counter()
                res = await svc.add_messages(tenant, h.user_id, msgs)
                report.add_batch(h.user_id, len(msgs), time.perf_counter() - t0, res)
                for t, m in zip(turns, res.messages, strict=True):
                    report.maps[h.user_id][m.id] = t.id

    await asyncio.gather(*(one_user(h) for h in histories))
    return report


def stated_values(h: UserHistory) -> dict[str, list[str]]:
    """Turn id -> the values that turn states about the user (turns that state something only)."""
    return {t.id: [st.split("=", 1)[1] for st in t.states] for t in h.turns if t.states}


def stated_turns(memory: Memory, turn_of: dict[str, str], values_of: dict[str, list[str]]) -> set[str]:
    """The turns whose statement ``memory`` states (``turn_of``: message id -> turn id; ``values_of``:
    turn id -> the values it states, :func:`stated_values`). A raw memory: its message's turn. A fact: the
    turns of the messages it cites, minus those that stated a value it replaced (``superseded_sources``,
    so the current version of a changed fact counts for the new value only), and only those whose value
    its text mentions: a fact citing a turn it says nothing of (chit-chat, or another attribute's
    statement) is not credited with it."""
    stale = set(memory.superseded_sources)
    turns = {turn_of[m] for m in memory.source_message_ids if m in turn_of and m not in stale}
    if memory.kind is not MemoryKind.FACT:
        return turns
    text = memory.content.lower()
    return {t for t in turns if any(_mentioned(v) in text for v in values_of.get(t, ()))}


def score(q: QuestionItem, ranked: list[set[str]]) -> dict[str, float]:
    """The metrics of one question from the turn ids of each result, best first."""
    gold, stale = set(q.gold), set(q.stale)
    first_gold = next((i for i, ids in enumerate(ranked) if ids & gold), None)
    first_stale = next((i for i, ids in enumerate(ranked) if ids & stale), None)
    top5: set[str] = set().union(*ranked[:5])
    row: dict[str, float] = {"hit@1": float(first_gold == 0), "recall@5": len(gold & top5) / len(gold)}
    if q.kind == "current":
        row["stale_above"] = float(first_stale is not None and (first_gold is None or first_stale < first_gold))
    return row


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(kind: str, key: str) -> float:
        xs = [r[key] for r in rows if r["kind"] == kind]
        return round(sum(xs) / len(xs), 4) if xs else float("nan")

    return {
        "current@1": mean("current", "hit@1"),
        "stale_above_current": mean("current", "stale_above"),
        "current_recall@5": mean("current", "recall@5"),
        "history_recall@5": mean("previous", "recall@5"),
        "previous@1": mean("previous", "hit@1"),
        "unchanged@1": mean("unchanged", "hit@1"),
        "unchanged_recall@5": mean("unchanged", "recall@5"),
        "questions": {k: sum(1 for r in rows if r["kind"] == k) for k in KINDS},
    }


async def evaluate(
    svc: MemoryService,
    histories: list[UserHistory],
    maps: dict[str, dict[str, str]],
    recipe: str,
    *,
    tenant: str = TENANT,
    limit: int = 10,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every question searched with ``recipe`` at the user's ``now`` and scored (:func:`score`) on the turns
    each hit states (:func:`stated_turns`; ``maps``: per user, message id -> turn id): the summary
    (:func:`aggregate`) and one row per question."""
    rows = []
    for h in histories:
        now = datetime.fromisoformat(h.now)
        turn_of, values_of = maps[h.user_id], stated_values(h)
        for q in h.questions:
            res = await svc.search(tenant, h.user_id, q.text, limit=limit, recipe=recipe, now=now)
            # a hit's earlier versions (attached to history questions) count for what they stated
            ranked = [set().union(stated_turns(hit.memory, turn_of, values_of),
                                  *(stated_turns(v, turn_of, values_of) for v in hit.history))
                      for hit in res.hits]  # fmt: skip
            row: dict[str, Any] = dict(score(q, ranked))
            row.update(user=h.user_id, kind=q.kind, attribute=q.attribute, question=q.text, named=h.name is not None)
            rows.append(row)
    if hasattr(svc.telemetry, "take"):
        svc.telemetry.take()
    return aggregate(rows), rows


# --------------------------------------------------------------------------------------
# what an extraction LLM left in the store
FACT_OUTCOMES = ("updated", "both_current", "new_only", "old_only", "neither")


async def fact_audit(
    svc: MemoryService,
    histories: list[UserHistory],
    *,
    tenant: str = TENANT,
    maps: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """For every attribute that changed, how the user's facts ended (the values are distinctive words, so
    a fact *mentions* a value when its text contains it, :func:`_mentioned`):

    * ``updated``: a current fact mentions the newest value and no current fact an older one (the
      change was applied as an UPDATE, or the old fact deleted);
    * ``both_current``: current facts mention both (the new value was ADDed beside the old);
    * ``new_only``: only the newest value is mentioned by a current fact, the old one by none ever;
    * ``old_only``: the newest value is in no current fact, an older one is;
    * ``neither``: no current fact mentions any of its values.

    Also counts every fact version written, current facts, and facts mentioning no planned value of the
    user at all (``unplanned``: small talk, other people, or wrong).

    With ``maps`` (per user, message id -> turn id: :attr:`IngestReport.maps`), what extraction made of
    the statements (a fact version is any version of kind fact but a deletion's tombstone):

    * ``statements``: the (turn, attribute=value) statements about the users; ``statements_with_fact``:
      those with a fact version that cites the turn's message and mentions the value;
      ``statement_coverage``: their share;
    * ``unstated_facts``: fact versions mentioning no value the user's history states, neither the
      user's own nor another person's (a distractor turn's); ``unstated_facts_per_message``: per message
      ingested;
    * ``about_others_facts``: fact versions mentioning a distractor's value and none of the user's;
    * ``unchanged_retired``: attributes that never change whose value some fact version mentions but no
      current fact does (an UPDATE or DELETE retired a fact that still held)."""
    outcomes = dict.fromkeys(FACT_OUTCOMES, 0)
    versions = current = unplanned = 0
    statements = with_fact = unstated = about_others = retired = messages = 0
    for h in histories:
        owner_facts = [
            m for m in await svc.list_memories(tenant, h.user_id, include_history=True, limit=1000)
            if m.kind is MemoryKind.FACT and not m.deleted
        ]  # fmt: skip
        versions += len(owner_facts)
        now = [m for m in owner_facts if m.is_current]
        current += len(now)
        planned: dict[str, list[str]] = {}
        for t in h.turns:
            for st in t.states:
                attr, value = st.split("=", 1)
                if value not in planned.setdefault(attr, []):
                    planned[attr].append(value)
        planned = {a: [_mentioned(v) for v in vs] for a, vs in planned.items()}
        values = {v for vs in planned.values() for v in vs}
        unplanned += sum(1 for m in now if not any(v in m.content.lower() for v in values))
        for q in h.questions:
            if q.kind != "current":
                continue
            newest, older = planned[q.attribute][-1], planned[q.attribute][:-1]
            new_now = any(newest in m.content.lower() for m in now)
            old_now = any(o in m.content.lower() for m in now for o in older)
            if new_now and old_now:
                outcomes["both_current"] += 1
            elif new_now:
                old_ever = any(o in m.content.lower() for m in owner_facts for o in older)
                outcomes["updated" if old_ever else "new_only"] += 1
            elif old_now:
                outcomes["old_only"] += 1
            else:
                outcomes["neither"] += 1
        if maps is None:
            continue
        turn_of = maps.get(h.user_id, {})
        messages += len(turn_of)
        states_of = {t.id: t.states for t in h.turns}
        statements += sum(len(sts) for sts in states_of.values())
        covered: set[tuple[str, str]] = set()  # (turn id, "attribute=value")
        for m in owner_facts:
            text = m.content.lower()
            for tid in {turn_of[i] for i in m.source_message_ids if i in turn_of}:
                covered.update((tid, st) for st in states_of.get(tid, ()) if _mentioned(st.split("=", 1)[1]) in text)
        with_fact += len(covered)
        others = {_mentioned(st.split("=", 1)[1]) for t in h.turns for st in t.others}
        for m in owner_facts:
            text = m.content.lower()
            if not any(v in text for v in values):
                if any(o in text for o in others):
                    about_others += 1
                else:
                    unstated += 1
        for q in h.questions:
            if q.kind == "unchanged":
                value = planned[q.attribute][0]
                ever = any(value in m.content.lower() for m in owner_facts)
                retired += int(ever and not any(value in m.content.lower() for m in now))
    out: dict[str, Any] = {"changed_attributes": outcomes, "fact_versions": versions, "current_facts": current,
                           "unplanned_current_facts": unplanned}  # fmt: skip
    if maps is not None:
        out.update(
            statements=statements,
            statements_with_fact=with_fact,
            statement_coverage=round(with_fact / statements, 4) if statements else None,
            unstated_facts=unstated,
            unstated_facts_per_message=round(unstated / messages, 4) if messages else 0.0,
            about_others_facts=about_others,
            unchanged_retired=retired,
        )
    return out


def _mentioned(value: str) -> str:
    """What a fact about ``value`` contains however it is worded ("on a keto diet" -> "keto"), lower case."""
    return value.lower().removeprefix("on a ").removesuffix(" diet")


def llm_summary(report: IngestReport, job_results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the extraction LLM did over the whole ingest: per message, per answer, per decision. A batch
    whose extraction was handed to its job (the LLM failed during the request) counts the job's."""
    extractions = [
        e for b in report.batches
        if isinstance(e := b["extraction"] if "answers" in b["extraction"] else job_results.get(b["job"] or ""), dict)
        and "answers" in e
    ]  # fmt: skip
    messages = sum(b["messages"] for b in report.batches)
    answers = [e["answers"] for e in extractions]
    asked = sum(a["asked"] for a in answers)
    decisions = {
        k: sum(int(e.get(k, 0)) for e in extractions) for k in ("ADD", "UPDATE", "DELETE", "NONE", "conflicts")
    }
    repairs: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    overruled: Counter[str] = Counter()
    for a in answers:
        repairs.update(a["repairs"])
        dropped.update(a["dropped"])
        overruled.update(a.get("overruled", {}))
    seconds = sum(a["seconds"] for a in answers)
    calls = sum(a["calls"] for a in answers)
    return {
        "messages": messages,
        "batches": len(report.batches),
        "batches_deferred": sum(1 for b in report.batches if "deferred" in b["extraction"]),
        "facts_per_message": round((decisions["ADD"] + decisions["UPDATE"]) / messages, 4) if messages else 0.0,
        "answers": asked,
        "valid_as_given": round(sum(a["valid"] for a in answers) / asked, 4) if asked else None,
        "usable_after_repair": (
            round(sum(a["valid"] + a["repaired"] + a["retried"] for a in answers) / asked, 4) if asked else None
        ),
        "usable": sum(a["valid"] + a["repaired"] + a["retried"] for a in answers),
        "retried": sum(a["retried"] for a in answers),
        "unusable": sum(a["unusable"] for a in answers),
        "decisions": decisions,
        "llm_calls": calls,
        "prompt_tokens": sum(int(a.get("prompt_tokens", 0)) for a in answers),
        "output_tokens": sum(int(a.get("output_tokens", 0)) for a in answers),
        "llm_calls_per_message": round(calls / messages, 3) if messages else 0.0,
        "llm_seconds_per_message": round(seconds / messages, 3) if messages else 0.0,
        "ingest_seconds_per_message": round(sum(b["seconds"] for b in report.batches) / messages, 3) if messages else 0,
        "repairs": dict(repairs.most_common()),
        "dropped": dict(dropped.most_common()),
        "overruled": dict(overruled.most_common()),
    }
