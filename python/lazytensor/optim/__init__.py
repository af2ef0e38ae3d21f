"""torch.optim for lazytensor: the optimizers SGD, Adam and AdamW
(optimizer.py says how they map onto the library's) and the learning-rate
schedulers of lazytensor.optim.lr_scheduler.

    import lazytensor.optim as optim
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    sched = optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
"""
from . import lr_scheduler
from .optimizer import SGD, Adam, AdamW, Optimizer, required

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler", "required"]
