// Forced into every file that uses protobuf when the build has -fsanitize=thread (the tsan
// preset; CMakeLists.txt adds `-include` of this file to protobuf's and gRPC++'s targets).
//
// Debian's libprotobuf.so is built without TSan, and protobuf 3.21's map_field.h gives
// MapFieldBase two more fields (seq1_, seq2_) when the file including it is compiled with
// -fsanitize=thread. Our generated messages with map fields would then disagree with the
// library's reflection about their layout: the text-format parser crashed on a config.pbtxt with
// `parameters`. Including map_field.h first with the sanitizer's macro hidden gives every file
// the library's layout; nothing else in protobuf's headers depends on that macro.
#pragma once

#if defined(__cplusplus) && __has_include(<google/protobuf/map_field.h>)
#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
#endif
