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

# axis: (pole A, pole B), each a regular expression of words (matched whole, any case). Read
# against the release's users 1-25 only (docs/fidelity.md, "The contradiction cue's word
# list"): the list as first written, less four words that, where the cue fired there,
# described the thing the person dealt with rather than the person ("messy problems", "a
# chaotic shift", "basic vehicle inspection concepts", "the week feel longer").
AXES: dict[str, tuple[str, str]] = {
    "outcome": (
        r"won|wins?|winning|succeed\w*|success\w*|passed|achiev\w*|accomplish\w*|triumph\w*"
        r"|victor\w*|prevail\w*",
        r"lost|lose|loses|losing|fail\w*|defeat\w*|flunk\w*|setback",
    ),
    "length": (
        r"brief|short|shorter|concise|succinct|terse|one-line|one-liners?|quick|minimal"
        r"|bullet\w*|summar\w*|tl;?dr|compact|to-the-point",
        r"detailed|thorough\w*|long|lengthy|in-depth|comprehensive|extensive|elaborate"
        r"|exhaustive|write-ups?|essays?|verbose|deep-dives?",
    ),
    "together": (
        r"sync|together|collaborat\w*|cooperat\w*|coordinat\w*|harmon\w*|teamwork|team-player"
        r"|cohesi\w*|united",
        r"alone|solo|clash\w*|conflict\w*|isolat\w*|solitary|friction|feud\w*|lone|loner",
    ),
    "calm": (
        r"calm\w*|relaxed|composed|unflappable|steady|serene|at ease|never worr\w*|unworried",
        r"anxious|anxiety|worr\w*|nervous|panick?\w*|stressed|tense|frantic|restless|fearful",
    ),
    "confidence": (
        r"confident|self-assured|assertive|bold|secure|self-belief",
        r"insecure|self-doubt\w*|doubts? (?:himself|herself|themselves)|timid|unsure|hesitant"
        r"|shy",
    ),
    "order": (
        r"organi[sz]ed|orderly|tidy|structured|systematic|methodical|planner|plans ahead",
        r"disorgani[sz]ed|scattered|cluttered|haphazard|disorderly|improvis\w*",
    ),
    "liking": (
        r"likes?|loves?|enjoys?|prefers?|fond|favou?rite|wants?|welcomes?|seeks?",
        r"dislikes?|hates?|avoids?|loathes?|resents?|rejects?|refuses?|dreads?|shuns?",
    ),
    "expertise": (
        r"expert\w*|advanced|proficient|skilled|mastery|master|fluent|seasoned|veteran|adept"
        r"|strong",
        r"novice|beginner|unfamiliar|inexperienced|limited|weak|struggles?|poor|new to"
        r"|little knowledge",
    ),
    "trust": (
        r"trust(?:s|ing|ful)?|believes? in|relies on|faith in",
        r"distrust\w*|mistrust\w*|suspicious|skeptic\w*|sceptic\w*|wary|cynical|doubts?",
    ),
    "warmth": (
        r"warm|friendly|gentle|kind|encouraging|supportive|empathetic|reassuring|soft",
        r"blunt|cold|harsh|stern|curt|brusque|critical|tough|no-nonsense",
    ),
    "formality": (r"formal|professional|polished", r"casual|informal|relaxed|chatty|slang"),
    "honesty": (
        r"honest\w*|truthful|transparent|candid|ethical|refus\w* to cheat|integrity",
        r"dishonest\w*|li(?:ed|es|ar)|deceiv\w*|deceptive|cheat\w*|stole|stolen|steal\w*"
        r"|fraud\w*|corrupt\w*",
    ),
    "sociability": (
        r"outgoing|extrovert\w*|sociable|social butterfly|gregarious|talkative",
        r"introvert\w*|reserved|quiet|withdrawn|private"
        r"|keeps to (?:himself|herself|themselves)",
    ),
    "risk": (
        r"risk-taking|risk-taker|bold|daring|adventurous|impulsive|reckless|gambl\w*",
        r"cautious|careful|risk-averse|prudent|conservative|wary|safe",
    ),
    "flexibility": (
        r"flexible|adaptable|open-minded|adjusts?|willing to (?:switch|change)",
        r"stubborn\w*|rigid|set in (?:his|her|their) ways|inflexible|unyielding"
        r"|resist\w* change",
    ),
    "gain": (
        r"gained|increas\w*|raised|promot\w*|hired|earned|saved|profit\w*|rich|wealthy",
        r"lost (?:his|her|their) (?:job|money|savings)|decreas\w*|fired|laid off|demot\w*|debt"
        r"|broke|poor|bankrupt\w*",
    ),
    "health": (r"healthy|fit|recovered|well", r"ill|sick|injur\w*|hurt|disease\w*|diagnos\w*"),
    "independence": (
        r"independent\w*|self-reliant|on (?:his|her|their) own|by (?:him|her|them)sel(?:f|ves)",
        r"dependent|relies on others|needs help|asks? for help|leans on",
    ),
    "outlook": (
        r"optimis\w*|hopeful|positive|upbeat|cheerful",
        r"pessimis\w*|hopeless|negative|gloomy|cynical",
    ),
}
# "over" reads as a contrast ("clean formats over long prose": not long), as users 1-25 use it.
_NEGATION = (
    r"no|not|never|without|hardly|rarely|barely|don't|doesn't|didn't|isn't|wasn't|won't"
    r"|can't|cannot|avoids?|lacks?|lacking|instead of|rather than|free of|over"
)
# a whole word: a hyphen joins ("no-nonsense" is one word: its "no" negates nothing)
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
