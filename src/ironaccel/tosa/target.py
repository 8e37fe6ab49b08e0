"""What a TOSA consumer implements: profiles, extensions and a level, and their 12-word wire form.

A program is validated against a :class:`Target`: an operator / element-type combination is legal only
when the target enables it (spec section "Profiles and Extensions"). virtio-accel carries the target
next to an artifact as twelve little-endian u32 words::

    [0x544F5341 ("TOSA"), ABI 1, major, minor, patch, profile bits, level, ext bits 0..31,
     ext bits 32..63, 0, 0, 0]

Profile bits: PRO-INT = 1, PRO-FP = 2. Level: 0 = none, 1 = 8K. Extension bits follow
:class:`Extension` order (INT16 = bit 0 ... INEXACTROUND = bit 10).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable

from ..core.errors import InvalidArgument
from .ops.rule import LEVEL_8K, LEVEL_NONE, Level

MAGIC = 0x544F5341
ABI = 1
WORDS = 12
_U32 = 0xFFFFFFFF


class Profile(enum.Enum):
    """A TOSA 1.0 base profile; the value is the specification's name."""

    INT = "PRO-INT"
    FP = "PRO-FP"

    @property
    def bit(self) -> int:
        return 1 if self is Profile.INT else 2

    @classmethod
    def parse(cls, name: str | Profile) -> Profile:
        """``pro-int``, ``PRO-INT``, ``tosa-pro-int``, ``int`` (likewise ``fp``)."""
        if isinstance(name, Profile):
            return name
        key = str(name).strip().upper().replace("_", "-").removeprefix("TOSA-").removeprefix("PRO-")
        key = {"INTEGER": "INT", "FLOATING-POINT": "FP", "FLOAT": "FP"}.get(key, key)
        try:
            return cls[key]
        except KeyError:
            raise InvalidArgument(f"unknown TOSA profile {name!r} (pro-int, pro-fp)") from None

    def __str__(self) -> str:
        return self.value


class Extension(enum.Enum):
    """A TOSA 1.0 extension; the value is the specification's name, the order gives the wire bit."""

    INT16 = "EXT-INT16"
    INT4 = "EXT-INT4"
    BF16 = "EXT-BF16"
    FP8E4M3 = "EXT-FP8E4M3"
    FP8E5M2 = "EXT-FP8E5M2"
    FFT = "EXT-FFT"
    VARIABLE = "EXT-VARIABLE"
    CONTROLFLOW = "EXT-CONTROLFLOW"
    DYNAMIC = "EXT-DYNAMIC"
    DOUBLEROUND = "EXT-DOUBLEROUND"
    INEXACTROUND = "EXT-INEXACTROUND"

    @property
    def bit(self) -> int:
        return 1 << _EXTENSION_ORDER.index(self)

    @property
    def profiles(self) -> frozenset[Profile]:
        """The profiles this extension extends (from the specification tables)."""
        from .spec import load

        return load().extensions[self]

    @classmethod
    def parse(cls, name: str | Extension) -> Extension:
        """``bf16``, ``EXT-BF16``, ``tosa-ext-bf16``, ``control_flow`` / ``controlflow``."""
        if isinstance(name, Extension):
            return name
        key = str(name).strip().upper().removeprefix("TOSA-").removeprefix("TOSA_")
        key = key.removeprefix("EXT-").removeprefix("EXT_").replace("_", "").replace("-", "")
        try:
            return cls[key]
        except KeyError:
            raise InvalidArgument(f"unknown TOSA extension {name!r}") from None

    def __str__(self) -> str:
        return self.value


_EXTENSION_ORDER = tuple(Extension)
_ALL_EXTENSION_BITS = (1 << len(_EXTENSION_ORDER)) - 1
LEVELS: dict[int, Level] = {0: LEVEL_NONE, 1: LEVEL_8K}


def parse_level(name: str | Level) -> Level:
    """``none`` or ``8k`` (any case)."""
    if isinstance(name, Level):
        return name
    key = str(name).strip().lower()
    if key in ("none", "", "0"):
        return LEVEL_NONE
    if key in ("8k", "1"):
        return LEVEL_8K
    raise InvalidArgument(f"unknown TOSA level {name!r} (none, 8k)")


@dataclasses.dataclass(frozen=True)
class Target:
    """Profiles, extensions and level a program is checked against (default: all of TOSA 1.0).

    Construction enforces the pairing rule: every extension must extend one of the chosen profiles
    (EXT-BF16 without PRO-FP is not a TOSA implementation).
    """

    profiles: frozenset[Profile] = frozenset(Profile)
    extensions: frozenset[Extension] = frozenset(Extension)
    level: Level = LEVEL_NONE
    version: tuple[int, int, int] = (1, 0, 2)

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", frozenset(Profile.parse(p) for p in self.profiles))
        object.__setattr__(self, "extensions", frozenset(Extension.parse(e) for e in self.extensions))
        if not self.profiles:
            raise InvalidArgument("a TOSA target needs at least one profile (pro-int, pro-fp)")
        if self.level not in LEVELS.values():
            raise InvalidArgument(f"unknown TOSA level {self.level.name!r}")
        if tuple(self.version[:2]) != (1, 0) or len(self.version) != 3:
            raise InvalidArgument(f"TOSA version {'.'.join(map(str, self.version))} is not 1.0.x")
        for ext in sorted(self.extensions, key=_EXTENSION_ORDER.index):
            if not ext.profiles & self.profiles:
                needs = " or ".join(sorted(p.value for p in ext.profiles))
                raise InvalidArgument(f"{ext.value} extends {needs}, which the target does not have")

    @classmethod
    def of(
        cls,
        profiles: Iterable[str | Profile] = (),
        extensions: Iterable[str | Extension] = (),
        level: str | Level = LEVEL_NONE,
    ) -> Target:
        """From names as people and tools write them (``pro-fp``, ``tosa-ext-bf16``, ``8k``)."""
        return cls(
            frozenset(Profile.parse(p) for p in profiles),
            frozenset(Extension.parse(e) for e in extensions),
            parse_level(level),
        )

    @property
    def names(self) -> frozenset[str]:
        """Specification names of everything enabled (``PRO-FP``, ``EXT-BF16``...)."""
        return frozenset(p.value for p in self.profiles) | frozenset(e.value for e in self.extensions)

    @property
    def enabled(self) -> frozenset[Profile | Extension]:
        """Profiles and extensions together, as the type-support tables name requirements."""
        return self.profiles | self.extensions

    def allows(self, requirement: Profile | Extension) -> bool:
        return requirement in self.profiles or requirement in self.extensions

    def encode(self) -> tuple[int, ...]:
        """The 12 u32 words of virtio-accel's target identity."""
        ext = 0
        for e in self.extensions:
            ext |= e.bit
        profiles = 0
        for p in self.profiles:
            profiles |= p.bit
        level = next(code for code, lv in LEVELS.items() if lv == self.level)
        major, minor, patch = self.version
        return (MAGIC, ABI, major, minor, patch, profiles, level, ext & _U32, ext >> 32, 0, 0, 0)

    @classmethod
    def decode(cls, words: Iterable[int]) -> Target:
        """Inverse of :meth:`encode`; anything not produced by it raises InvalidArgument."""
        words = tuple(words)
        if len(words) != WORDS:
            raise InvalidArgument(f"a TOSA target is {WORDS} words, got {len(words)}")
        for i, w in enumerate(words):
            if not isinstance(w, int) or not 0 <= w <= _U32:
                raise InvalidArgument(f"target word {i} is not a u32: {w!r}")
        magic, abi, major, minor, patch, profiles, level, ext_lo, ext_hi, *reserved = words
        if magic != MAGIC:
            raise InvalidArgument(f"target magic {magic:#010x} is not 'TOSA' ({MAGIC:#010x})")
        if abi != ABI:
            raise InvalidArgument(f"target ABI {abi} is not {ABI}")
        if max(major, minor, patch) > 0xFFFF:
            raise InvalidArgument(f"target version {major}.{minor}.{patch} is out of range")
        if (major, minor) != (1, 0):
            raise InvalidArgument(f"target TOSA version {major}.{minor}.{patch} is not 1.0.x")
        if profiles == 0 or profiles & ~3:
            raise InvalidArgument(f"target profile bits {profiles:#x} are not a non-empty subset of {{1, 2}}")
        if level not in LEVELS:
            raise InvalidArgument(f"target level {level} is not 0 (none) or 1 (8K)")
        ext = ext_lo | (ext_hi << 32)
        if ext & ~_ALL_EXTENSION_BITS:
            raise InvalidArgument(f"target extension bits {ext:#x} name extensions TOSA 1.0 does not have")
        if any(reserved):
            raise InvalidArgument("target words 9..11 are reserved and must be zero")
        return cls(
            frozenset(p for p in Profile if profiles & p.bit),
            frozenset(e for e in Extension if ext & e.bit),
            LEVELS[level],
            (major, minor, patch),
        )

    def __str__(self) -> str:
        parts = sorted(p.value for p in self.profiles) + [e.value for e in _EXTENSION_ORDER if e in self.extensions]
        return f"{' '.join(parts)} level {self.level.name}"


DEFAULT_TARGET = Target()
