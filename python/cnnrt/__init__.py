"""cnnrt: a minimal CNN inference runtime (docs/PYTHON.md).

    import cnnrt
    engine = cnnrt.Engine.load("models/alexnet.yaml", device="auto")
    context = engine.create_context(batch=1)
    logits = context.run(cnnrt.preprocess_image("models/samples/chelsea.png", engine))
"""

from ._cnnrt import (
    Context,
    Engine,
    Error,
    __version__,
    cuda_available,
    preprocess_image,
)

__all__ = ["Context", "Engine", "Error", "__version__", "cuda_available", "preprocess_image"]
