"""virtio-accel protocol 1.0 on the wire: one import for the constants, records and frame codec.

Design choices:
1. Layouts are declared once (:mod:`.wire_structs`): field widths in order make the packed
   little-endian layout, so there are no offsets to keep in step by hand. The tests compare every
   record with virtio-accel's layout manifest.
2. Decoding a request applies every rule that needs no device state, in the specification's order
   (frame bound, exact length, opcode, header flags, then the command's fixed length, counts, reserved
   fields and value namespaces), and ends in a decoded :class:`Request` or an error carrying the status
   to answer (:class:`RequestRejected`). Counts are compared with their bounds before anything is built.
3. Unknown values the specification keeps representable stay raw integers: a response status, an
   accelerator class, capability bits, an artifact format. An unknown opcode never becomes an enum
   member; it is answered UNSUPPORTED.
4. Records are immutable and re-encode byte for byte: ``decode(frame).encode() == frame`` for every
   frame the decoder accepts.
"""

from __future__ import annotations

from .wire_constants import *  # noqa: F403 - this module is the one import for the whole codec
from .wire_constants import __all__ as _constants
from .wire_decode_request import *  # noqa: F403
from .wire_decode_request import __all__ as _decode_request
from .wire_decode_response import *  # noqa: F403
from .wire_decode_response import __all__ as _decode_response
from .wire_errors import *  # noqa: F403
from .wire_errors import __all__ as _errors
from .wire_frames import *  # noqa: F403
from .wire_frames import __all__ as _frames
from .wire_structs import *  # noqa: F403
from .wire_structs import __all__ as _structs

__all__ = [*_constants, *_decode_request, *_decode_response, *_errors, *_frames, *_structs]
