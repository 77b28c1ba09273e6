// A small JSON reader for the controller examples: enough for an export's metadata.json (objects,
// arrays, strings, numbers, true/false/null). A real controller would use its own JSON library;
// this keeps the examples free of dependencies beyond libtorch and MuJoCo.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace json_lite {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  bool has(const std::string& key) const { return kind == Kind::Object && object.count(key) > 0; }

  const Value& at(const std::string& key) const {
    if (!has(key)) throw std::runtime_error("metadata has no field '" + key + "'");
    return object.at(key);
  }

  double as_number() const {
    if (kind != Kind::Number) throw std::runtime_error("expected a number in metadata");
    return number;
  }

  const std::string& as_string() const {
    if (kind != Kind::String) throw std::runtime_error("expected a string in metadata");
    return string;
  }

  // A number given once for every joint, or a list of them.
  std::vector<double> as_numbers(std::size_t n) const {
    if (kind == Kind::Number) return std::vector<double>(n, number);
    std::vector<double> out;
    for (const Value& v : array) out.push_back(v.as_number());
    if (out.size() != n) throw std::runtime_error("a per-joint list in metadata has the wrong length");
    return out;
  }

  std::vector<std::string> as_strings() const {
    std::vector<std::string> out;
    for (const Value& v : array) out.push_back(v.as_string());
    return out;
  }

  // Compact JSON with the object keys in order (std::map): equal values give equal text, so the
  // text can key a map of values.
  std::string dump() const {
    switch (kind) {
      case Kind::Null: return "null";
      case Kind::Bool: return boolean ? "true" : "false";
      case Kind::Number: {
        char text[32];
        std::snprintf(text, sizeof(text), "%.17g", number);
        return text;
      }
      case Kind::String: return quoted(string);
      case Kind::Array: {
        std::string out = "[";
        for (const Value& v : array) out += (out.size() > 1 ? "," : "") + v.dump();
        return out + "]";
      }
      case Kind::Object: {
        std::string out = "{";
        for (const auto& [key, v] : object) out += (out.size() > 1 ? "," : "") + quoted(key) + ":" + v.dump();
        return out + "}";
      }
    }
    return "null";
  }

 private:
  static std::string quoted(const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }
};

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Value parse() {
    Value v = value();
    space();
    if (pos_ != text_.size()) fail("trailing characters");
    return v;
  }

 private:
  const std::string& text_;
  std::size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("metadata.json: " + what + " at character " + std::to_string(pos_));
  }

  void space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }

  bool literal(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }

  Value value() {
    space();
    if (pos_ >= text_.size()) fail("unexpected end");
    Value v;
    const char c = text_[pos_];
    if (c == '{') {
      v.kind = Value::Kind::Object;
      ++pos_;
      space();
      if (text_[pos_] == '}') return ++pos_, v;
      while (true) {
        space();
        std::string key = string_literal();
        space();
        if (text_[pos_++] != ':') fail("expected ':'");
        v.object[key] = value();
        space();
        if (text_[pos_] == ',') { ++pos_; continue; }
        if (text_[pos_] == '}') { ++pos_; return v; }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Value::Kind::Array;
      ++pos_;
      space();
      if (text_[pos_] == ']') return ++pos_, v;
      while (true) {
        v.array.push_back(value());
        space();
        if (text_[pos_] == ',') { ++pos_; continue; }
        if (text_[pos_] == ']') { ++pos_; return v; }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = Value::Kind::String;
      v.string = string_literal();
      return v;
    }
    if (literal("true")) { v.kind = Value::Kind::Bool; v.boolean = true; return v; }
    if (literal("false")) { v.kind = Value::Kind::Bool; return v; }
    if (literal("null")) return v;
    char* end = nullptr;
    v.kind = Value::Kind::Number;
    v.number = std::strtod(text_.c_str() + pos_, &end);
    if (end == text_.c_str() + pos_) fail("unexpected character");
    pos_ = static_cast<std::size_t>(end - text_.c_str());
    return v;
  }

  std::string string_literal() {
    if (text_[pos_] != '"') fail("expected a string");
    std::string out;
    for (++pos_; pos_ < text_.size() && text_[pos_] != '"'; ++pos_) {
      if (text_[pos_] != '\\') { out += text_[pos_]; continue; }
      const char e = text_[++pos_];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': out += '?'; pos_ += 4; break;  // metadata names are ASCII
        default: out += e;
      }
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
};

inline Value parse(const std::string& text) { return Parser(text).parse(); }

}  // namespace json_lite
