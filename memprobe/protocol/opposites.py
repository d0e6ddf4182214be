"""Contradiction cues for the offline judge: two texts that take opposite sides of one axis.

MiniLM puts "won a case" next to "lost a case" and "one-line answers" next to "detailed
write-ups" (same topic, same words), so its cosines cannot see that a label contradicts the
truth, which the rubric scores 0. This is a word list of our own: common axes a user-state
target takes a side on (an outcome, how long or detailed, alone or together, calm or anxious,
...), each with its two poles. A text's side on an axis is its pole words' count, A minus B,
where a word within two words after a negation or contrast cue ("not", "without", "rather
than", "over": "short answers over long prose") counts for the other pole; two texts
conflict on an axis where their sides have opposite signs. The offline judge's fit decides
how much a conflict weighs (users 1-25 of the release), not this module.
"""

from __future__ import annotations

import re

# axis: (pole A, pole B), each a regular expression of words (matched whole, any case)
AXES: dict[str, tuple[str, str]] = {
    "outcome": (
        r"won|wins?|winning|succeed\w*|success\w*|passed|achiev\w*|accomplish\w*|triumph\w*"
        r"|prevail\w*",
        r"lost|lose|loses|losing|fail\w*|defeat\w*|flunk\w*|setbacks?",
    ),
    "length": (
        r"brief|short|shorter|concise|succinct|terse|one-line|one-liners?|minimal|compact"
        r"|bullet\w*|to-the-point",
        r"detailed|thorough\w*|long|lengthy|longer|in-depth|comprehensive|extensive|elaborate"
        r"|exhaustive|write-ups?|essays?|verbose|deep-dives?",
    ),
    "together": (
        r"sync|together|collaborat\w*|cooperat\w*|coordinat\w*|harmon\w*|teamwork|cohesi\w*",
        r"alone|solo|clash\w*|conflict\w*|isolat\w*|solitary|friction|feud\w*|loner",
    ),
    "calm": (
        r"calm|calmer|relaxed|composed|unflappable|serene|unworried",
        r"anxious|anxiety|worr\w*|nervous|panick?\w*|frantic|restless|fearful",
    ),
    "confidence": (
        r"confident|self-assured|assertive|secure|self-belief",
        r"insecure|self-doubt\w*|timid|unsure|hesitant|shy",
    ),
    "order": (
        r"organi[sz]ed|orderly|tidy|systematic|methodical",
        r"disorgani[sz]ed|scattered|cluttered|haphazard|disorderly",
    ),
    "liking": (
        r"likes?|loves?|enjoys?|prefers?|fond|favou?rite|welcomes?|seeks?",
        r"dislikes?|hates?|avoids?|loathes?|resents?|rejects?|refuses?|dreads?|shuns?",
    ),
    "expertise": (
        r"expert\w*|advanced|proficient|skilled|mastery|fluent|seasoned|veteran|adept",
        r"novice|beginners?|basic|unfamiliar|inexperienced|struggles?",
    ),
    "trust": (
        r"trust(?:s|ing|ful)?|relies on|faith in",
        r"distrust\w*|mistrust\w*|suspicious|skeptic\w*|sceptic\w*|wary|cynical",
    ),
    "warmth": (
        r"warm|friendly|gentle|kind|encouraging|supportive|empathetic|reassuring",
        r"blunt|cold|harsh|stern|curt|brusque|no-nonsense",
    ),
    "formality": (r"formal", r"casual|informal|chatty|slang"),
    "honesty": (
        r"honest\w*|truthful|transparent|candid|ethical|integrity",
        r"dishonest\w*|lied|lies|liar|deceiv\w*|deceptive|cheat\w*|stole|stolen|steal\w*"
        r"|fraud\w*",
    ),
    "sociability": (
        r"outgoing|extrovert\w*|sociable|gregarious|talkative",
        r"introvert\w*|reserved|withdrawn|solitary",
    ),
    "risk": (
        r"risk-taking|risk-taker|daring|adventurous|impulsive|reckless|gambl\w*",
        r"cautious|careful|risk-averse|prudent",
    ),
    "flexibility": (
        r"flexible|adaptable|open-minded|adjusts?",
        r"stubborn\w*|rigid|inflexible|unyielding",
    ),
    "independence": (
        r"independent\w*|self-reliant",
        r"dependent|relies on others|needs help",
    ),
    "outlook": (
        r"optimis\w*|hopeful|upbeat|cheerful",
        r"pessimis\w*|hopeless|gloomy",
    ),
}
_NEGATION = (
    r"no|not|never|without|hardly|rarely|barely|don't|doesn't|didn't|isn't|wasn't|won't"
    r"|can't|cannot|lacks?|lacking|instead of|rather than|free of|over"
)
# a whole word: a hyphen joins ("no-nonsense", "brochure-like" are one word each)
_START, _END = r"(?<![\w'-])", r"(?![\w'-])"
_POLES = {
    axis: (re.compile(rf"{_START}(?:{a}){_END}", re.I), re.compile(rf"{_START}(?:{b}){_END}", re.I))
    for axis, (a, b) in AXES.items()
}
# a negation cue, then at most two words, right before a pole word
_NEGATED = re.compile(rf"{_START}(?:{_NEGATION}){_END}(?:[^\w'-]+[\w'-]+){{0,2}}\W*$", re.I)


def sides(text: str) -> dict[str, int]:
    """Per axis the text touches: pole A words minus pole B words (negated ones flipped)."""
    out: dict[str, int] = {}
    for axis, (a, b) in _POLES.items():
        net = 0
        for sign, pole in ((1, a), (-1, b)):
            for m in pole.finditer(text):
                net += -sign if _NEGATED.search(text[: m.start()]) else sign
        if net:
            out[axis] = net
    return out


def conflicts(a: str, b: str) -> list[str]:
    """The axes on which ``a`` and ``b`` take opposite sides."""
    sa, sb = sides(a), sides(b)
    return [axis for axis in sa if axis in sb and sa[axis] * sb[axis] < 0]
