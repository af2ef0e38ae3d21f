"""The PyTorch twins of lazytensor-train's models, shared by the peer scripts
(train_accuracy_torch.py, train_step_torch.py)."""
import torch


def build(name, hidden=512):
    """'cnn' takes [B, 1, 28, 28] images; 'mlp' takes rows of 784 pixels."""
    if name == "cnn":
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(3136, 128), torch.nn.ReLU(), torch.nn.Dropout(0.25),
            torch.nn.Linear(128, 10))
    return torch.nn.Sequential(
        torch.nn.Linear(784, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10))
