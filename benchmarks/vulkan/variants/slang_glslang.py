#!/usr/bin/env python3
"""Compile a GLSL compute shader with the glslang built into the slangpy wheel.

    python3 benchmarks/vulkan/variants/slang_glslang.py SRC OUT [-I DIR ...] [--library PATH]

glslang 13 (the newest packaged for pip, which builds the shipped kernels) predates
GL_NV_cooperative_matrix2, so it knows no tensor layouts. The
slangpy wheel carries a current glslang as a library (libslang-glslang-*.so) behind one C entry point,
``glslang_compile_1_2``, which takes the whole source as one string. So this script resolves
``#include "..."`` itself (the source's folder first, then each -I), hands the text over through cffi,
and writes the SPIR-V (1.6, unoptimized, as glslangValidator -V writes it). Probe material only:
nothing shipped is built this way.

The library is looked for at --library, then $SLANG_GLSLANG, then .cache/slang-glslang/; ``variants/build``
puts it there (``pip download --no-deps slangpy==0.43.1``, then the one file unzipped).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".cache" / "slang-glslang"
COMPUTE = 6  # SLANG_STAGE_COMPUTE
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')

_DECLARATIONS = """
typedef void (*Output)(void const *data, size_t size, void *user);
typedef struct { int major, minor, patch; } SpirvVersion;
typedef struct {
    size_t sizeInBytes;
    char const *sourcePath;
    void const *inputBegin;
    void const *inputEnd;
    Output diagnosticFunc;
    void *diagnosticUserData;
    Output outputFunc;
    void *outputUserData;
    int slangStage;
    unsigned action;             /* 0: GLSL to SPIR-V */
    unsigned optimizationLevel;  /* 0: none */
    unsigned debugInfoType;      /* 0: none */
    char const *spirvTargetName;
    SpirvVersion spirvVersion;
    char const *entryPointName;
} CompileRequest;
int glslang_compile_1_2(CompileRequest *request);
"""


def flatten(path: Path, search: list[Path], seen: tuple[Path, ...] = ()) -> str:
    """``path``'s text with every quoted include replaced by the file's text, marked with #line."""
    if path in seen:
        raise SystemExit(f"slang_glslang: {path} includes itself (through {' -> '.join(map(str, seen))})")
    lines = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _INCLUDE.match(line)
        if not match:
            lines.append(line)
            continue
        name = match.group(1)
        found = next((d / name for d in [path.parent, *search] if (d / name).is_file()), None)
        if found is None:
            raise SystemExit(f"{path}:{number}: cannot find include {name!r} (searched {path.parent}, {search})")
        lines += [f'#line 1 "{found}"', flatten(found, search, (*seen, path)), f'#line {number + 1} "{path}"']
    return "\n".join(lines) + "\n"


def library(explicit: str | None) -> Path:
    candidates = [Path(p) for p in (explicit, os.environ.get("SLANG_GLSLANG")) if p]
    candidates += sorted(CACHE.glob("libslang-glslang-*.so"))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise SystemExit(f"slang_glslang: no libslang-glslang-*.so (looked at --library, $SLANG_GLSLANG, {CACHE})")


def compile_glsl(text: str, source_name: str, lib_path: Path) -> bytes:
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(_DECLARATIONS)
    lib = ffi.dlopen(str(lib_path))
    spirv: list[bytes] = []
    messages: list[bytes] = []

    @ffi.callback("Output")
    def on_output(data, size, user):  # type: ignore[no-untyped-def]
        spirv.append(bytes(ffi.buffer(data, size)))

    @ffi.callback("Output")
    def on_message(data, size, user):  # type: ignore[no-untyped-def]
        messages.append(bytes(ffi.buffer(data, size)))

    source = ffi.new("char[]", text.encode())
    name = ffi.new("char[]", source_name.encode())
    entry = ffi.new("char[]", b"main")
    request = ffi.new("CompileRequest *")
    request.sizeInBytes = ffi.sizeof("CompileRequest")
    request.sourcePath, request.entryPointName = name, entry
    request.inputBegin, request.inputEnd = source, source + len(text.encode())
    request.diagnosticFunc, request.outputFunc = on_message, on_output
    request.slangStage = COMPUTE
    request.spirvVersion.major, request.spirvVersion.minor = 1, 6
    code = lib.glslang_compile_1_2(request)
    report = b"".join(messages).decode("utf-8", "replace").strip()
    if code != 0 or not spirv:
        raise SystemExit(f"slang_glslang: {source_name} failed to compile:\n{report}")
    if report:
        print(report, file=sys.stderr)
    return b"".join(spirv)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("-I", dest="include", action="append", type=Path, default=[], help="an include folder")
    parser.add_argument("--library", help="libslang-glslang-*.so to use")
    args = parser.parse_args()
    text = flatten(args.source.resolve(), [d.resolve() for d in args.include])
    args.output.write_bytes(compile_glsl(text, str(args.source), library(args.library)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
