#pragma once
// The umbrella header: everything a kiln user needs.

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/tensor.h"
#include "kiln/device/blas.h"
#include "kiln/device/kernel_scope.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/dispatch/dispatch.h"
#include "kiln/dispatch/functional.h"
#include "kiln/fake/fake_mode.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ops/op_table.h"
#include "kiln/passes/functionalize.h"
#include "kiln/trace/proxy_mode.h"
