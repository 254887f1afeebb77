#pragma once

// Small readers for Keras layer configs (nlohmann::json). A missing or null key gives the
// fallback; a key of the wrong type gives the fallback too, and the converters check ranges.

#include <nlohmann/json.hpp>

namespace rnnserve::models::keras {

using Json = nlohmann::json;

inline const Json* Find(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

template <typename T>
T Get(const Json& obj, const char* key, T fallback) {
  const Json* v = Find(obj, key);
  if (!v) return fallback;
  try {
    return v->get<T>();
  } catch (const Json::exception&) {
    return fallback;
  }
}

// An integer that Keras writes either bare (`2`) or as a one-element tuple (`[2]`).
inline int GetIntOrFirst(const Json& obj, const char* key, int fallback) {
  const Json* v = Find(obj, key);
  if (!v) return fallback;
  if (v->is_array() && v->size() == 1 && (*v)[0].is_number_integer()) return (*v)[0].get<int>();
  if (v->is_number_integer()) return v->get<int>();
  return fallback;
}

}  // namespace rnnserve::models::keras
