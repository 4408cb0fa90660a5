// The GPT-2-style pre-LN decoder the runner trains, as separately callable pieces a pipeline
// stage can own a subset of:
//   InputLayer (token + position embedding, per vocabulary shard)
//   → TransformerLayer × layers → FinalNorm (on the stage of the last layer)
//   → OutputLayer (logits and softmax cross-entropy, per vocabulary shard).
// Everything is templated on the element type and instantiated for float and double.
#pragma once

#include <pipescope/exec/model_params.h>
#include <pipescope/exec/transformer_layer.h>
#include <pipescope/exec/vocab_layers.h>
