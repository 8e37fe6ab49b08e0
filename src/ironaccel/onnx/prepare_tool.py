"""The preparation stage, run by the ONNX environment's interpreter as a script (it imports onnx and
onnxruntime, never ironaccel): ``python prepare_tool.py IN.onnx OUT.onnx [SHAPES_JSON]``.

Fixes the inputs' dimensions that ``SHAPES_JSON`` (``{"input name": [1, 3, 224, 224]}``) gives, refuses
inputs whose shape stays symbolic (TOSA 1.0 programs have static shapes), and folds the model's shape
arithmetic into constants with onnxruntime's basic graph optimizations: exporters such as
``torch.onnx.export`` compute the shapes of reshapes at run time (``Shape -> Gather -> Concat``), which ONNX's
shape inference does not follow, and torch-mlir's importer then gives tensors of unknown rank that its
lowering cannot take. The basic level only folds constants, removes redundant nodes and fuses within
standard ONNX operators; the extended levels would bring in onnxruntime's own operators.

Prints ``{"inputs": [...], "outputs": [...], "folded": bool, "note": str}`` (each tensor's name, shape and
numpy dtype) on stdout. Exit status 3 with one line on stderr for a model the conversion cannot take.
"""

from __future__ import annotations

import json
import sys


def _refuse(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(3)


def _tensors(values, initializers: set[str]) -> list[dict]:
    import onnx

    found = []
    for value in values:
        if value.name in initializers:
            continue
        kind = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            _refuse(f"{value.name!r} is not a tensor ({value.type.WhichOneof('value')}); TOSA programs take tensors")
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in kind.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(kind.elem_type).name if kind.elem_type else "unknown"
        found.append({"name": value.name, "shape": dims, "dtype": dtype})
    return found


def main(argv: list[str]) -> int:
    import onnx

    source, target = argv[1], argv[2]
    shapes = json.loads(argv[3]) if len(argv) > 3 else {}
    model = onnx.load(source)
    initializers = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in initializers]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        _refuse(f"shapes= names {unknown}, which are not inputs of the model (its inputs: {names})")
    for value in model.graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            given = shapes[value.name]
            if len(given) != len(dims):
                _refuse(f"shapes= gives {value.name!r} rank {len(given)}; the model declares rank {len(dims)}")
            for dim, size in zip(dims, given, strict=True):
                dim.Clear()
                dim.dim_value = int(size)
    symbolic = [
        f"{t['name']} {t['shape']}"
        for t in _tensors(model.graph.input, initializers)
        if any(not isinstance(d, int) or d <= 0 for d in t["shape"])
    ]
    if symbolic:
        _refuse(
            f"inputs with dimensions not fixed: {', '.join(symbolic)}; TOSA 1.0 programs have static shapes: "
            "give them with shapes={name: [...]}"
        )
    folded, note = True, ""
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = target
        options.log_severity_level = 3
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - a model onnxruntime cannot load goes on unfolded: torch-mlir may take it
        folded, note = False, f"onnxruntime did not fold it: {type(exc).__name__}: {str(exc).splitlines()[0]}"
        onnx.save(model, target)
    prepared = onnx.load(target, load_external_data=False)
    initializers = {t.name for t in prepared.graph.initializer}
    report = {
        "inputs": _tensors(prepared.graph.input, initializers),
        "outputs": _tensors(prepared.graph.output, set()),
        "folded": folded,
        "note": note,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
