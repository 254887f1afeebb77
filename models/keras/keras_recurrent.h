#pragma once

// Keras recurrent layers -> engine::RecurrentSpec in the canonical layout of engine/ir.h.
//
// Keras gate order and layouts, converted here:
//   LSTM      kernel [I, 4H], recurrent [H, 4H], columns i, f, c, o -> i, f, g, o (same blocks);
//             bias [4H] (input bias; recurrent bias zero).
//   GRU       kernel [I, 3H], recurrent [H, 3H], columns z, r, h -> r, z, n (first two swapped);
//             bias [3H] (reset_after=False) or [2, 3H] (row 0 input, row 1 recurrent).
//   SimpleRNN kernel [I, H], recurrent [H, H], bias [H].
//   CuDNNLSTM / CuDNNGRU store each gate's input block in cuDNN's [H, I] row-major order inside
//             the [I, G*H] array and each recurrent block transposed; biases are [8H] / [6H]
//             (input then recurrent). They convert as Keras's own _convert_rnn_weights does:
//             to LSTM (sigmoid, tanh) and to GRU(reset_after=True) with gates z, r, h.
//             An LSTM / GRU layer whose bias is flat with 8H / 6H values holds CuDNN weights
//             (a CuDNN model's save_weights loaded into its CPU architecture): converted the
//             same way, with the activations its own config names (Keras does the same).
//   Bidirectional holds the forward layer's arrays, then the backward layer's.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/keras/hdf5_file.h"
#include "models/keras/keras_json.h"
#include "models/keras/keras_layers.h"

namespace rnnserve::models::keras {

bool IsRecurrentClass(const std::string& cls);

// LSTM, GRU, SimpleRNN, CuDNNLSTM, CuDNNGRU (go_backwards, return_sequences, return_state).
absl::StatusOr<engine::RecurrentSpec> ConvertRecurrentLayer(const LayerContext& ctx,
                                                            const std::string& name,
                                                            const std::string& cls,
                                                            const Json& config,
                                                            const std::vector<Array>& arrays);

// Bidirectional(LSTM | GRU | SimpleRNN | CuDNN*) with merge_mode concat, sum, mul, ave or None.
absl::StatusOr<engine::RecurrentSpec> ConvertBidirectional(const LayerContext& ctx,
                                                           const std::string& name,
                                                           const Json& config,
                                                           const std::vector<Array>& arrays);

}  // namespace rnnserve::models::keras
