// SPDX-License-Identifier: Apache-2.0

// The API's request framing: when the bytes a client has sent so far are a
// request to answer (api_request.hpp).
#include "api_request.hpp"

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace s4n {

namespace {

using Json = nlohmann::ordered_json;

// nlohmann's out_of_range error for a number no double holds ("1e400");
// HostFwdApi's parse fails on it as parson's does.
constexpr int kNumberOverflow = 406;

// Parses without building anything and notes where and why it stopped,
// and whether the first value is a bare number (the one token that ends
// only at the next byte: "1" may still become "1e400").
class Probe final : public nlohmann::json_sax<Json> {
public:
    bool failed = false;
    std::size_t error_pos = 0; // bytes the lexer read, past the end if it hit it
    int error_id = 0;
    std::string error_token;
    bool top_level_number = false;

    bool null() override { return scalar(false); }
    bool boolean(bool) override { return scalar(false); }
    bool number_integer(number_integer_t) override { return scalar(true); }
    bool number_unsigned(number_unsigned_t) override { return scalar(true); }
    bool number_float(number_float_t, const string_t &) override {
        return scalar(true);
    }
    bool string(string_t &) override { return scalar(false); }
    bool binary(binary_t &) override { return scalar(false); }
    bool start_object(std::size_t) override { return open(); }
    bool key(string_t &) override { return true; }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t pos, const std::string &token,
                     const Json::exception &ex) override {
        failed = true;
        error_pos = pos;
        error_id = ex.id;
        error_token = token;
        return false;
    }

private:
    bool scalar(bool number) {
        if (depth_ == 0) top_level_number = number;
        return true;
    }
    bool open() {
        depth_++;
        return true;
    }
    bool close() {
        depth_--;
        return true;
    }
    int depth_ = 0;
};

bool number_char(char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
           c == '+' || c == '-';
}

// An overflowing number that ends where the bytes do is hopeless only if
// its exponent is there and not negative: more digits can only make it
// bigger. "1000...0" may still get "e-400", "1e-" more digits.
bool overflow_can_recover(const std::string &token) {
    std::size_t e = token.find_first_of("eE");
    return e == std::string::npos || (e + 1 < token.size() && token[e + 1] == '-') ||
           e + 1 == token.size();
}

} // namespace

std::string_view request_text(std::string_view bytes) {
    return bytes.substr(0, bytes.find('\0'));
}

RequestState request_state(std::string_view bytes) {
    std::string_view text = request_text(bytes);
    bool ended = text.size() < bytes.size(); // a NUL: no byte can change it
    Probe probe;
    // strict=false: the first value, the rest ignored, as parson does.
    Json::sax_parse(text.begin(), text.end(), &probe,
                    nlohmann::json::input_format_t::json, false);
    if (!probe.failed) {
        if (!ended && probe.top_level_number && !text.empty() &&
            number_char(text.back()))
            return RequestState::Incomplete;
        return RequestState::Complete;
    }
    if (ended) return RequestState::Invalid;
    // The lexer read past the last byte: it wanted more (an open string,
    // object or array, "tru", a cut UTF-8 sequence, "1e").
    if (probe.error_pos > text.size()) return RequestState::Incomplete;
    // Every other token ends on a byte of its own; a number is the one that
    // the next byte may continue.
    if (probe.error_id == kNumberOverflow && probe.error_pos == text.size() &&
        overflow_can_recover(probe.error_token))
        return RequestState::Incomplete;
    return RequestState::Invalid;
}

} // namespace s4n
