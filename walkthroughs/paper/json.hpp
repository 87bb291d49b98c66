// walkthroughs/paper/json.hpp -- a minimal JSON reader, enough for /work/shared/paper/tables.json
// (objects, arrays, strings with simple escapes, numbers, true/false/null). Not a general
// library: no \u escapes beyond ASCII, no streaming; errors are linattn::Error naming the offset.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reference/check.hpp"

namespace linattn::paper {

/// One JSON value. Objects keep their keys sorted (std::map); arrays keep their order.
struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;

  bool is_number() const { return kind == Kind::number; }
  bool is_string() const { return kind == Kind::string; }
  /// Member `key` of an object (a linattn::Error naming the key when absent).
  const Json& at(const std::string& key) const {
    if (kind != Kind::object) fail("Json::at", "key '" + key + "'", "an object", "another JSON kind");
    const auto it = obj.find(key);
    if (it == obj.end()) fail("Json::at", "key", "a member of the object", "'" + key + "' (absent)");
    return it->second;
  }
  bool has(const std::string& key) const { return kind == Kind::object && obj.count(key) > 0; }
  /// Element i of an array.
  const Json& operator[](size_t i) const {
    if (kind != Kind::array || i >= arr.size())
      fail("Json::operator[]", "index", "an index into an array of " + std::to_string(arr.size()), std::to_string(i));
    return arr[i];
  }
  size_t size() const { return kind == Kind::array ? arr.size() : obj.size(); }
};

namespace detail {
struct JsonParser {
  const std::string& s;
  size_t i = 0;
  [[noreturn]] void error(const std::string& expected) const {
    fail("parse_json", "text", expected, "offset " + std::to_string(i));
  }
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool lit(const char* w) {
    const std::string t(w);
    if (s.compare(i, t.size(), t) == 0) return i += t.size(), true;
    return false;
  }
  std::string string() {
    if (s[i] != '"') error("a string");
    ++i;
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c == '\\') {
        if (i >= s.size()) error("an escape");
        const char e = s[i++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;  // \" \\ \/ map to themselves
      }
      out += c;
    }
    if (i >= s.size()) error("a closing quote");
    ++i;
    return out;
  }
  Json value() {
    ws();
    if (i >= s.size()) error("a value");
    Json v;
    const char c = s[i];
    if (c == '{') {
      v.kind = Json::Kind::object;
      ++i, ws();
      if (s[i] == '}') return ++i, v;
      for (;;) {
        ws();
        const std::string k = string();
        ws();
        if (s[i] != ':') error("':'");
        ++i;
        v.obj[k] = value();
        ws();
        if (s[i] == ',') { ++i; continue; }
        if (s[i] == '}') return ++i, v;
        error("',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::array;
      ++i, ws();
      if (s[i] == ']') return ++i, v;
      for (;;) {
        v.arr.push_back(value());
        ws();
        if (s[i] == ',') { ++i; continue; }
        if (s[i] == ']') return ++i, v;
        error("',' or ']'");
      }
    }
    if (c == '"') return v.kind = Json::Kind::string, v.str = string(), v;
    if (lit("true")) return v.kind = Json::Kind::boolean, v.b = true, v;
    if (lit("false")) return v.kind = Json::Kind::boolean, v;
    if (lit("null")) return v;
    char* end = nullptr;
    v.num = std::strtod(s.c_str() + i, &end);
    if (end == s.c_str() + i) error("a number");
    i = static_cast<size_t>(end - s.c_str());
    v.kind = Json::Kind::number;
    return v;
  }
};
}  // namespace detail

/// Parse a whole JSON text.
inline Json parse_json(const std::string& text) {
  detail::JsonParser p{text};
  Json v = p.value();
  p.ws();
  if (p.i != text.size()) p.error("the end of the text");
  return v;
}

}  // namespace linattn::paper
