"""torch.nn for lazytensor: Module, the layers and losses (modules.py), the
functional forms (lazytensor.nn.functional) and nn.utils.clip_grad_norm_.

    import lazytensor.nn as nn
    import lazytensor.nn.functional as F
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))

The layers have torch's layouts and parameter names (Linear's weight is
[out, in]; MultiheadAttention's in_proj_weight, in_proj_bias, out_proj), so
torch state_dicts load. The earlier lazytensor.nn names stay: the functional
forms at this level (nn.cross_entropy, nn.conv2d, ...), nn.clip_grad_norm_,
nn.save / nn.load (the library's parameter files; lazytensor.save is
torch.save's counterpart), and the library optimizers nn.SGD / nn.Adam /
nn.AdamW, which drop the grads after each step as the C API does
(lazytensor.optim has torch's).
"""
from . import functional, utils
from .attention import MultiheadAttention
from ._legacy import SGD, Adam, AdamW, Optimizer, load, save
from .functional import (accuracy, adaptive_avg_pool2d, avg_pool2d, batch_norm, conv2d,
                         conv_transpose2d, cross_entropy, dropout, embedding, group_norm,
                         layer_norm, max_pool2d, mse_loss, nll_loss, relu,
                         scaled_dot_product_attention)
from .modules import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, BCEWithLogitsLoss, Conv2d,
                      CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity, L1Loss,
                      LayerNorm, Linear, LogSoftmax, MaxPool2d, Module, ModuleDict, ModuleList,
                      MSELoss, NLLLoss, Parameter, ReLU, Sequential, Sigmoid, SiLU, Softmax, Tanh)
from .utils import clip_grad_norm_

__all__ = ["functional", "utils", "Parameter", "Module", "Sequential", "ModuleList", "ModuleDict",
           "Linear", "MultiheadAttention", "Conv2d", "BatchNorm2d", "LayerNorm", "Embedding",
           "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Softmax", "LogSoftmax", "Identity",
           "Flatten", "Dropout", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "CrossEntropyLoss",
           "NLLLoss", "MSELoss",
           "L1Loss", "BCEWithLogitsLoss", "clip_grad_norm_", "relu", "cross_entropy", "accuracy",
           "mse_loss", "nll_loss", "scaled_dot_product_attention", "embedding", "dropout",
           "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
           "batch_norm", "layer_norm", "group_norm", "save", "load", "Optimizer", "SGD", "Adam",
           "AdamW"]
