"""Phase 2: the vision encoder's quality and speed under quantization.

* :mod:`.images`  - seeded generated image sets (shapes; rendered text; bar and line charts) written in
  ImageFolder layout, and the ImageFolder loader a user points at real images;
* :mod:`.encoder` - the tiny CLIP-style encoder trained on them (cached by parameter hash), and the
  loader of a Hugging Face id / local directory (CLIP ViT-L/14);
* :mod:`.quant`   - quantization paths side by side (bf16/fp16, torchao INT8 weight-only and dynamic,
  FP8, torch dynamic INT8 on CPU, and a deliberately damaged 2-bit path), parameter bytes, timing;
* :mod:`.quality` - embedding agreement and linear-probe accuracy drop, per image and per subset;
* :mod:`.vlm`     - the tiny vision-language model of the throughput gate;
* :mod:`.memory`  - the KV-cache tokens that freed encoder bytes buy.

Heavy imports (torch, PIL, matplotlib, transformers, torchao) happen inside the functions.
"""
