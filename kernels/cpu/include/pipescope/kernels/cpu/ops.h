// The CPU reference ops, all in one include. Each op is a function template over the element
// type, instantiated for float (what the CPU backend runs) and double (what the gradient checks
// use). Buffers are plain row-major arrays with explicit sizes; no op allocates more than a small
// scratch vector, and none throws.
#pragma once

#include <pipescope/kernels/cpu/adamw.h>
#include <pipescope/kernels/cpu/attention.h>
#include <pipescope/kernels/cpu/cross_entropy.h>
#include <pipescope/kernels/cpu/embedding.h>
#include <pipescope/kernels/cpu/gemm.h>
#include <pipescope/kernels/cpu/layers.h>
#include <pipescope/kernels/cpu/vocab_shard.h>
