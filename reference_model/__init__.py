"""kipcheck's reference model: an executable specification of KIP-392, KIP-227,
KIP-1023 and KIP-1166. Pure Python, no I/O, deterministic; imports nothing else
from the project. Entry points: `Model` (Porcupine-style init/step/equal/describe),
`scenario.replay`, and the rule modules `kip392`, `kip227`, `kip1023`, `kip1166`.
"""
from .model import Model, ModelState
from .profiles import PROFILES, Profile, for_version, profile_for
from .scenario import replay

__all__ = ["Model", "ModelState", "PROFILES", "Profile", "for_version", "profile_for", "replay"]
