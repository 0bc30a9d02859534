"""The training script: builds the model, its optimizer, then compiles the model (as nanoGPT's train.py does)."""
import torch

from model import GPT

compile = hasattr(torch, "compile")  # torch >= 2.0
torch.manual_seed(0)
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
if compile:
    model = torch.compile(model, backend="eager")  # the eager backend: traced by dynamo, no C++ build on CI
ctx = torch.autocast("cpu", dtype=torch.bfloat16)
for step in range(3):
    idx = torch.randint(0, 32000, (2, 16), generator=torch.Generator().manual_seed(step))
    with ctx:
        logits, loss = model(idx, idx)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print("step %d: loss %.4f" % (step, loss.item()))
