"""The semantic suite's cases on the contract's objects: device information, memory domains, buffers and their
transfers, artifacts, bindings, contexts (isolation, release, quotas). Registered into
:data:`~.semantic_fixtures.CASES` on import (:mod:`.semantic` imports this).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.errors import Busy, Incompatible, InvalidArgument, OutOfBounds, PermissionDenied, ResourceLimit, Unsupported
from ..runtime import (
    Accelerator,
    Access,
    ArtifactRef,
    Binding,
    BufferDesc,
    BufferUsage,
    EventState,
    MemoryDomain,
    Quota,
    ReleaseRejected,
    SubmitRejected,
)
from .semantic_fixtures import CASES, IO, Fixture, Skip, add_program, admits_nothing, case, expect


@case("device.info-stable")
def _info_stable(acc: Accelerator) -> None:
    first = acc.device_info()
    assert first == acc.device_info(), "device_info changed between calls"
    assert first.domains, "no memory domain offered"


@case("execute.add")
def _execute(acc: Accelerator) -> None:
    f = Fixture(acc)
    f.add(np.arange(4), np.full(4, 0.5))
    f.close()


def _domain_case(domain: MemoryDomain) -> Callable[[Accelerator], None]:
    def run(acc: Accelerator) -> None:
        if domain not in acc.device_info().domains:
            raise Skip(f"{domain.name} memory not offered")
        f = Fixture(acc, domain)
        info = f.bufs[0].info
        assert info.size == 16 and info.allocation_bytes >= 16, info
        f.write_inputs(np.ones(4), np.ones(4))
        ev = acc.submit(f.queue, f.program, f.bindings())
        assert acc.wait(ev, 30) is EventState.COMPLETE
        np.testing.assert_array_equal(f.output(), np.full(4, 2, np.float32))
        acc.destroy_event(ev)
        f.close()

    return run


for _d in MemoryDomain:
    CASES[f"memory.{_d.name.lower()}"] = _domain_case(_d)


@case("buffer.descriptor-validation")
def _desc(acc: Accelerator) -> None:
    ctx = acc.create_context()
    for bad in (
        BufferDesc(0),
        BufferDesc(16, alignment=3),
        BufferDesc(16, usage=BufferUsage(0)),
        BufferDesc(16, usage=BufferUsage(64)),
    ):
        expect(InvalidArgument, lambda bad=bad: acc.allocate_buffer(ctx, bad), f"allocate {bad}")
    acc.destroy_context(ctx)


@case("buffer.segmented-transfer-bounds")
def _bounds(acc: Accelerator) -> None:
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(64, usage=IO))
    for i in range(4):  # four segments reassemble the whole range
        acc.write_buffer(buf, 16 * i, bytes([i]) * 16)
    assert bytes(acc.read_buffer(buf, 0, 64)) == b"".join(bytes([i]) * 16 for i in range(4))
    assert bytes(acc.read_buffer(buf, 60, 4)) == b"\x03" * 4
    expect(OutOfBounds, lambda: acc.write_buffer(buf, 60, b"x" * 5), "write past the end")
    expect(OutOfBounds, lambda: acc.read_buffer(buf, 64, 1), "read past the end")
    expect(OutOfBounds, lambda: acc.read_buffer(buf, -1, 1), "negative offset")
    acc.free_buffer(buf)
    acc.destroy_context(ctx)


@case("buffer.transfer-permissions")
def _perm(acc: Accelerator) -> None:
    ctx = acc.create_context()
    ro = acc.allocate_buffer(ctx, BufferDesc(16, usage=BufferUsage.PROGRAM_INPUT | BufferUsage.TRANSFER_DESTINATION))
    wo = acc.allocate_buffer(ctx, BufferDesc(16, usage=BufferUsage.PROGRAM_OUTPUT | BufferUsage.TRANSFER_SOURCE))
    acc.write_buffer(ro, 0, b"\0" * 16)
    expect(PermissionDenied, lambda: acc.read_buffer(ro, 0, 16), "read without TRANSFER_SOURCE")
    expect(PermissionDenied, lambda: acc.write_buffer(wo, 0, b"\0" * 16), "write without TRANSFER_DESTINATION")
    acc.free_buffer(ro)
    acc.free_buffer(wo)
    acc.destroy_context(ctx)


@case("artifact.bounds")
def _artifact(acc: Accelerator) -> None:
    from ..tosa.errors import FormatError

    ctx = acc.create_context()
    good = add_program()
    expect(Incompatible, lambda: acc.load_program(ctx, ArtifactRef(good, 1 << 20, format=0x1234)), "foreign format")
    expect(FormatError, lambda: acc.load_program(ctx, ArtifactRef(good[:40], 1 << 20)), "truncated artifact")
    if admits_nothing(acc):  # refused at admission, before its resident bound is weighed
        expect(Unsupported, lambda: acc.load_program(ctx, ArtifactRef(good, 0)), "a program nothing admits")
        acc.destroy_context(ctx)
        raise Skip("no program admitted: the resident bound is weighed only for an admitted program")
    expect(ResourceLimit, lambda: acc.load_program(ctx, ArtifactRef(good, 0)), "resident bound of 0 bytes")
    assert acc.live_resources()["program"] == 0
    acc.destroy_context(ctx)


@case("binding.validation")
def _binding(acc: Accelerator) -> None:
    f = Fixture(acc)
    b = f.bufs
    bad_sets = {
        "missing slot": [Binding(0, b[0]), Binding(1, b[1])],
        "repeated slot": [Binding(0, b[0]), Binding(0, b[1]), Binding(2, b[2])],
        "slot out of range": [Binding(0, b[0]), Binding(1, b[1]), Binding(3, b[2])],
        "short range": [Binding(0, b[0], 0, 12), Binding(1, b[1]), Binding(2, b[2])],
        "range past end": [Binding(0, b[0], 8, 16), Binding(1, b[1]), Binding(2, b[2])],
        "output bound read-only": [Binding(0, b[0]), Binding(1, b[1]), Binding(2, b[2], access=Access.READ)],
    }
    for what, bindings in bad_sets.items():
        exc = expect(SubmitRejected, lambda bindings=bindings: acc.submit(f.queue, f.program, bindings), what)
        assert isinstance(exc.error, (InvalidArgument, OutOfBounds, PermissionDenied)), (what, exc.error)
    assert acc.live_resources()["event"] == 0, "a rejected submit retained an event"
    ro = acc.allocate_buffer(f.ctx, BufferDesc(16, usage=BufferUsage.PROGRAM_INPUT))
    exc = expect(
        SubmitRejected,
        lambda: acc.submit(f.queue, f.program, [Binding(0, b[0]), Binding(1, b[1]), Binding(2, ro)]),
        "write to input-only buffer",
    )
    assert isinstance(exc.error, PermissionDenied)
    acc.free_buffer(ro)
    f.close()


@case("context.isolation")
def _isolation(acc: Accelerator) -> None:
    f1, f2 = Fixture(acc), Fixture(acc)
    foreign = [Binding(0, f2.bufs[0]), Binding(1, f1.bufs[1]), Binding(2, f1.bufs[2])]
    exc = expect(SubmitRejected, lambda: acc.submit(f1.queue, f1.program, foreign), "another context's buffer")
    assert isinstance(exc.error, PermissionDenied)
    exc = expect(SubmitRejected, lambda: acc.submit(f1.queue, f2.program, f1.bindings()), "another context's program")
    assert isinstance(exc.error, PermissionDenied)
    f2.close()
    stale = f2.bufs[0]
    expect(InvalidArgument, lambda: acc.read_buffer(stale, 0, 4), "stale handle")
    f1.write_inputs(np.ones(4), np.ones(4))
    ev = acc.submit(f1.queue, f1.program, f1.bindings())
    assert acc.wait(ev, 30) is EventState.COMPLETE
    acc.destroy_event(ev)
    f1.close()


@case("context.destroy-nonempty")
def _nonempty(acc: Accelerator) -> None:
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(16))
    exc = expect(ReleaseRejected, lambda: acc.destroy_context(ctx), "destroy a context holding a buffer")
    assert exc.handle is ctx and isinstance(exc.error, Busy)
    acc.free_buffer(buf)
    acc.destroy_context(ctx)


@case("quota.buffer-bytes")
def _quota(acc: Accelerator) -> None:
    ctx = acc.create_context(Quota(buffer_bytes=100))
    a = acc.allocate_buffer(ctx, BufferDesc(64))
    expect(ResourceLimit, lambda: acc.allocate_buffer(ctx, BufferDesc(64)), "allocation beyond the quota")
    acc.free_buffer(a)
    b = acc.allocate_buffer(ctx, BufferDesc(64))
    acc.free_buffer(b)
    acc.destroy_context(ctx)
