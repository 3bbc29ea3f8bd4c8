"""Assign one of the 15 categories without an LLM.

Each category has a short description; a text gets the category whose description
embedding is most similar to the text's embedding, with a keyword vote that wins when a
text names a category's vocabulary explicitly. The result is deterministic for a model.
"""

from __future__ import annotations

import numpy as np

from ..domain import Category
from ..encoding.encoder import MatryoshkaEncoder

CATEGORY_DESCRIPTIONS: dict[Category, str] = {
    Category.PERSONAL_DETAILS: "personal details: name, age, birthday, where I live, my family background, identity",
    Category.PROFESSIONAL: "work and career: my job, employer, colleagues, office, promotion, business",
    Category.HEALTH: "health: illness, doctor, medication, injury, therapy, fitness, sleep, hospital",
    Category.RELATIONSHIPS: "relationships: friends, partner, husband, wife, children, parents, dating, family",
    Category.PREFERENCES: "preferences: things I like, love, dislike, favourite, prefer, enjoy",
    Category.HOBBIES: "hobbies: painting, music, sports, games, reading, hiking, crafts, free time activities",
    Category.GOALS: "goals and plans: I want to, I plan to, hoping to achieve, dream, ambition",
    Category.FINANCIAL: "money and finances: salary, savings, budget, debt, investment, buying, rent",
    Category.EDUCATIONAL: "education: school, university, courses, studying, degree, classes, learning",
    Category.TRAVEL: "travel: trips, vacations, flights, visiting cities and countries, hotels",
    Category.EMOTIONAL: "feelings and emotions: happy, sad, stressed, anxious, proud, grateful, excited",
    Category.TECHNICAL_SKILLS: "technical skills: programming languages, software, tools, engineering expertise",
    Category.DIETARY: "food and diet: vegetarian, allergies, cooking, meals, restaurants, recipes",
    Category.BEHAVIORAL_PATTERNS: "habits and routines: every morning, usually, always, weekly routine",
    Category.COMMUNICATION_STYLE: "communication style: prefers short answers, formal tone, bullet points, language",
}

_KEYWORDS: dict[Category, tuple[str, ...]] = {
    Category.HEALTH: ("doctor", "hospital", "allergic", "medication", "sick", "illness", "therapy", "injury"),
    Category.DIETARY: ("vegetarian", "vegan", "gluten", "diet", "allergy", "allergic to", "recipe"),
    Category.TRAVEL: ("trip", "flight", "vacation", "travel", "visited", "hotel", "holiday"),
    Category.PROFESSIONAL: ("my job", "work at", "working at", "colleague", "my boss", "promotion", "career"),
    Category.EDUCATIONAL: ("university", "college", "school", "degree", "course", "class", "studying"),
    Category.FINANCIAL: ("salary", "savings", "budget", "mortgage", "debt", "invest", "rent"),
    Category.TECHNICAL_SKILLS: ("python", "javascript", "programming", "kubernetes", "sql", "coding"),
    Category.COMMUNICATION_STYLE: ("bullet points", "short answers", "formal tone", "reply in"),
}


class EmbeddingCategorizer:
    """Nearest category description by cosine, overridden by an explicit keyword match.

    The descriptions are embedded on first use, through the encoder's queue like every other text.
    """

    def __init__(self, encoder: MatryoshkaEncoder) -> None:
        self._encoder = encoder
        self._categories = list(CATEGORY_DESCRIPTIONS)
        self._prototypes: np.ndarray | None = None

    async def prototypes(self) -> np.ndarray:
        """The full vectors of the category descriptions (embedded on first use; two first uses at
        once both embed them, which is harmless and needs no lock bound to one event loop)."""
        if self._prototypes is None:
            full, _ = await self._encoder.encode_async([CATEGORY_DESCRIPTIONS[c] for c in self._categories])
            self._prototypes = full
        return self._prototypes

    async def categorize_many(self, texts: list[str], embeddings: np.ndarray) -> list[Category]:
        prototypes = await self.prototypes()
        return [self._categorize(prototypes, t, e) for t, e in zip(texts, embeddings, strict=True)]

    def _categorize(self, prototypes: np.ndarray, text: str, embedding: np.ndarray) -> Category:
        lowered = f" {text.lower()} "
        votes = {c: sum(1 for k in kws if f" {k}" in lowered) for c, kws in _KEYWORDS.items()}
        best_kw = max(votes, key=lambda c: votes[c])
        if votes[best_kw] > 0:
            return best_kw
        return self._categories[int(np.argmax(prototypes @ embedding))]
