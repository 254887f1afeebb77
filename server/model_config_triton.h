#pragma once

// Triton's config.pbtxt habits in ours (model_config.h parses with these).
//
// A Triton config.pbtxt carries fields rnnserve does not use: `backend:` (rnnserve runs every
// model itself), model_warmup, response_cache, input `format:`, instance_group `profile:`, and
// the like. Those Triton field names are accepted and ignored; each is logged once per
// config.pbtxt (backend as INFO, the rest as WARNING, naming the field and that it is ignored).
// A field that neither we nor Triton define (a typo such as `max_bach_size`) stays a parse
// error, naming the line.

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rnnserve::server {

// A field the text parser did not know: its message type (full name), name and position.
struct UnknownConfigField {
  std::string message_type;
  std::string field;
  int line = 0;    // 1-based
  int column = 0;  // 1-based
};

// Triton writes list-valued fields without a colon (`model_warmup [ { ... } ]`), which the
// protobuf text parser accepts for fields it knows but cannot skip for ones it does not: returns
// `text` with a ':' put before the '[' of each Triton-only field (model_warmup: [ ... ]).
// Strings and comments are left alone.
std::string ColonBeforeTritonLists(const std::string& text);

// Fails, naming the first field that Triton does not define either; otherwise logs each
// Triton field that is ignored, once per (`where`, field) in this process.
absl::Status AcceptTritonFields(const std::vector<UnknownConfigField>& unknown,
                                const std::string& where);

// Logs a warning when config.pbtxt's `name` differs from its directory's name (the directory's
// name is the one the model is served under), once per (`where`, name).
void WarnNameDiffers(const std::string& config_name, const std::string& dir_name,
                     const std::string& where);

}  // namespace rnnserve::server
