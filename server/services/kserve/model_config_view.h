#pragma once

// A loaded model's configuration as Triton's ModelConfig message, for the ModelConfig RPC.
//
// Triton's convention: with max_batch_size > 0 the dims leave out the batch axis; with 0 the
// model takes no implicit batch axis and dims are the full shape. rnnserve models always have a
// batch axis, and max_batch_size 0 means "unlimited" in config.pbtxt, so such a model is shown
// with max_batch_size 0 and dims that include the batch axis (-1): a client then sends the full
// shape, batch axis included, which is what the server expects on every path.

#include "inference/model_config.pb.h"
#include "server/servable.h"

namespace rnnserve::server::kserve {

inference::ModelConfig TritonConfig(const Servable& servable);

}  // namespace rnnserve::server::kserve
