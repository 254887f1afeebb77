#pragma once

// Parses a model file in a child process first, within a time limit, before the server parses it
// itself. A corrupt file can make a parser loop forever (Debian's libhdf5 1.10 does, on some
// damaged global heaps) or crash; in the child that costs the child, and the server fails that
// one model's load with DEADLINE_EXCEEDED or INTERNAL and goes on serving the others.
//
// The child is this binary run as `rnnserve --check-model FILE [--format F] [--architecture A]`
// (RunModelCheck). A file the child parses, or rejects with an ordinary error, is then parsed
// in-process, which gives the same model or the same error. Off until the binary's main calls
// EnableModelFileCheck (libraries and tests load in-process only).

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "models/model_loader.h"

namespace rnnserve::server {

// `binary` is run as the child (the server passes /proc/self/exe); a limit of zero disables it.
void EnableModelFileCheck(std::string binary, absl::Duration limit);

// OK when the check is off, or the child finished (whatever it found); DEADLINE_EXCEEDED when
// it ran past the limit (it is killed); INTERNAL when it died of a signal or could not start.
// A check that passed is remembered: the next check of the same file with the same options,
// unchanged (size, times, inode), passes at once without a child, once. Safe from any thread;
// checks of different files run side by side.
absl::Status CheckModelFile(const std::string& file, const models::LoadOptions& options);

// From now on every check in progress is ended (its child killed) and every new one fails at
// once, CANCELLED: the server is shutting down. For SIGTERM during loading.
void CancelModelFileChecks();

// The child's side: argv from `--check-model` on (argv[0] is "--check-model"). Returns the
// exit code: 0 parsed (or --help), 1 rejected (the error on stderr), 2 bad arguments.
int RunModelCheck(int argc, char** argv);

}  // namespace rnnserve::server
