// SPDX-License-Identifier: Apache-2.0

// rknp's pesto protocol: requests and replies, formatted and parsed
// (pesto_protocol.hpp).
#include "pesto_protocol.hpp"

#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>

namespace cmd::pesto {

namespace {

constexpr std::string_view kMagic = "rknp-pesto ";
constexpr std::string_view kEnd = "end";
// Digits of a version: enough for any we will number, few enough that a
// stream of them is hopeless early.
constexpr std::size_t kMaxVersionDigits = 5;

bool printable(char c) { return c >= 0x20 && c <= 0x7e; }
bool spec_char(char c) { return c > 0x20 && c <= 0x7e; }

bool is_prefix(std::string_view part, std::string_view of) {
    return part.size() <= of.size() && of.substr(0, part.size()) == part;
}

// A peer's text inside our messages: printable, and short.
std::string quoted(std::string_view s) {
    constexpr std::size_t kMax = 64;
    std::string out = "'";
    for (std::size_t i = 0; i < s.size() && i < kMax; i++)
        out += printable(s[i]) ? s[i] : '?';
    if (s.size() > kMax) out += "...";
    return out + "'";
}

// The version digits; false if they are no version (empty, a leading
// zero, too many, not digits).
bool parse_version(std::string_view digits, unsigned &version) {
    if (digits.empty() || digits.size() > kMaxVersionDigits || digits[0] == '0')
        return false;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
    return ec == std::errc() && end == digits.data() + digits.size();
}

std::string version_mismatch(unsigned theirs) {
    return "protocol version " + std::to_string(theirs) +
           " is not supported: this rknp-pasta speaks version " +
           std::to_string(kVersion) +
           " (run the rknp-pesto of the same rknp release)";
}

// The header line so far ("" when fine): whole once its \n came.
std::string check_header(std::string_view line, bool whole) {
    const std::string foreign =
        "not an rknp-pesto request (it does not start with 'rknp-pesto')";
    if (line.size() <= kMagic.size()) {
        if (!is_prefix(line, kMagic)) return foreign;
        if (!whole) return "";
        return line.size() + 1 >= kMagic.size() ? "no protocol version after 'rknp-pesto'"
                                                : foreign;
    }
    if (!line.starts_with(kMagic)) return foreign;
    std::string_view digits = line.substr(kMagic.size());
    unsigned version = 0;
    if (!whole) {
        // A prefix of a version: digits, no leading zero, not too many.
        bool digits_only = digits.find_first_not_of("0123456789") == std::string_view::npos;
        if (digits_only && digits[0] != '0' && digits.size() <= kMaxVersionDigits)
            return "";
        return "bad protocol version " + quoted(digits);
    }
    if (!parse_version(digits, version)) return "bad protocol version " + quoted(digits);
    if (version != kVersion) return version_mismatch(version);
    return "";
}

// Which of `words` the field is (-1 if none): whole, when `complete`,
// else as a prefix of one of them.
int keyword(std::string_view f, bool complete,
            std::initializer_list<std::string_view> words) {
    int i = 0;
    for (std::string_view w : words) {
        if (complete ? f == w : is_prefix(f, w)) return i;
        i++;
    }
    return -1;
}

// One field of a change line ("" when fine). complete: a space or the
// line's end followed it, so it must be whole; else a prefix will do.
std::string check_field(std::size_t index, std::string_view f, bool complete,
                        Change &c) {
    if (index == 0) {
        int k = keyword(f, complete, {"add", "delete", kEnd});
        if (k < 0) return "unknown operation " + quoted(f) + " (add, delete or end)";
        if (complete && k == 2) return "'end' stands alone on its line";
        c.op = k == 1 ? Op::remove : Op::add;
        return "";
    }
    if (index == 1) {
        int k = keyword(f, complete, {"tcp", "udp"});
        if (k < 0) return "unknown protocol " + quoted(f) + " (tcp or udp)";
        c.proto = k == 1 ? Proto::udp : Proto::tcp;
        return "";
    }
    if (f.size() > kMaxSpec)
        return "port spec longer than " + std::to_string(kMaxSpec) + " bytes";
    if (complete && f.empty()) return "empty port spec";
    c.spec = std::string(f);
    return "";
}

// A change line so far ("" when fine). "end" was handled by the caller.
std::string check_change(std::string_view line, bool whole, Change &c) {
    if (whole && line.empty()) return "empty line";
    std::size_t index = 0, pos = 0;
    for (;;) {
        std::size_t space = line.find(' ', pos);
        bool last = space == std::string_view::npos;
        std::string_view f = line.substr(pos, last ? std::string_view::npos : space - pos);
        if (index > 2) return "too many fields (OP PROTO SPEC)";
        if (!last && f.empty()) return "empty field (one space between fields)";
        if (std::string e = check_field(index, f, !last || whole, c); !e.empty())
            return e;
        if (last) break;
        index++;
        pos = space + 1;
    }
    if (whole && index < 2) return "missing fields (OP PROTO SPEC)";
    return "";
}

std::string line_error(unsigned line, const std::string &what) {
    return "line " + std::to_string(line) + ": " + what;
}

// A peer's message, kept printable and on one line, cut at kMaxMessage.
std::string clean_message(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < kMaxMessage; i++)
        out += printable(s[i]) ? s[i] : '?';
    if (s.size() > kMaxMessage) out += "...";
    return out;
}

} // namespace

const char *op_name(Op op) { return op == Op::add ? "add" : "delete"; }
const char *proto_name(Proto proto) { return proto == Proto::tcp ? "tcp" : "udp"; }

std::string format_request(const std::vector<Change> &changes) {
    if (changes.empty()) throw std::invalid_argument("no port specs");
    if (changes.size() > kMaxChanges)
        throw std::invalid_argument(std::to_string(changes.size()) +
                                    " port specs, at most " +
                                    std::to_string(kMaxChanges) + " at once");
    std::string out = std::string(kMagic) + std::to_string(kVersion) + "\n";
    for (const Change &c : changes) {
        if (c.spec.empty() || c.spec.size() > kMaxSpec)
            throw std::invalid_argument("port spec " + quoted(c.spec) + ": 1 to " +
                                        std::to_string(kMaxSpec) + " bytes");
        for (char ch : c.spec)
            if (!spec_char(ch))
                throw std::invalid_argument("port spec " + quoted(c.spec) +
                                            ": only printable ASCII, no spaces");
        out += std::string(op_name(c.op)) + " " + proto_name(c.proto) + " " +
               c.spec + "\n";
    }
    out += std::string(kEnd) + "\n";
    if (out.size() >= kMaxRequest)
        throw std::invalid_argument("the port specs take " + std::to_string(out.size()) +
                                    " bytes, fewer than " +
                                    std::to_string(kMaxRequest) + " at once");
    return out;
}

ParsedRequest parse_request(std::string_view bytes) {
    ParsedRequest out;
    auto invalid = [&out](std::string why) {
        out.state = RequestState::Invalid;
        out.changes.clear();
        out.error = std::move(why);
        return out;
    };
    std::size_t pos = 0;
    for (unsigned line_no = 1;; line_no++) {
        std::size_t nl = bytes.find('\n', pos);
        bool whole = nl != std::string_view::npos;
        std::string_view line = bytes.substr(pos, whole ? nl - pos : std::string_view::npos);
        // The header's own check names a foreign protocol first (no byte
        // outside "rknp-pesto " and digits passes it).
        if (line_no == 1) {
            if (std::string e = check_header(line, whole); !e.empty()) return invalid(e);
        }
        for (char ch : line)
            if (!printable(ch)) {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", unsigned(static_cast<unsigned char>(ch)));
                return invalid(line_error(line_no, std::string("byte ") + hex +
                                                       " (only printable ASCII)"));
            }
        if (line_no == 1) {
            // checked above
        } else if (whole && line == kEnd) {
            if (nl + 1 != bytes.size()) return invalid("bytes after 'end'");
            if (out.changes.empty()) return invalid("no changes before 'end'");
            out.state = RequestState::Complete;
            return out;
        } else {
            Change c{Op::add, Proto::tcp, {}};
            if (std::string e = check_change(line, whole, c); !e.empty())
                return invalid(line_error(line_no, e));
            if (whole) {
                if (out.changes.size() == kMaxChanges)
                    return invalid("more than " + std::to_string(kMaxChanges) +
                                   " changes");
                out.changes.push_back(std::move(c));
            }
        }
        if (!whole) {
            out.changes.clear(); // Incomplete: nothing to act on yet
            return out;
        }
        pos = nl + 1;
    }
}

std::string ok_reply() {
    return std::string(kMagic) + std::to_string(kVersion) + " ok\n";
}

std::string error_reply(std::string_view message) {
    return std::string(kMagic) + std::to_string(kVersion) + " error " +
           clean_message(message) + "\n";
}

Reply parse_reply(std::string_view bytes) {
    if (bytes.empty())
        return {false, "no reply: the socket closed the connection unanswered "
                       "(rknp-pasta serves only its own uid and root, 16 clients "
                       "at once; its log says which)"};
    if (!is_prefix(kMagic, bytes))
        return {false, "not an rknp-pasta control socket: its reply does not "
                       "start with 'rknp-pesto' (pasta's own socket needs "
                       "pasta's own pesto)"};
    std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos || nl + 1 != bytes.size())
        return {false, "malformed reply " + quoted(bytes)};
    std::string_view rest = bytes.substr(kMagic.size(), nl - kMagic.size());
    std::size_t space = rest.find(' ');
    unsigned version = 0;
    if (!parse_version(rest.substr(0, space), version))
        return {false, "malformed reply " + quoted(bytes)};
    std::string_view verdict =
        space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    if (version != kVersion) {
        std::string m = "protocol version mismatch: the socket speaks rknp-pesto "
                        "protocol " + std::to_string(version) +
                        ", this rknp-pesto speaks " + std::to_string(kVersion) +
                        ": use the rknp-pesto of the rknp release that runs the "
                        "socket's rknp-pasta";
        if (verdict.starts_with("error "))
            m += " (it said: " + clean_message(verdict.substr(6)) + ")";
        return {false, m};
    }
    if (verdict == "ok") return {true, ""};
    if (verdict.starts_with("error ")) return {false, clean_message(verdict.substr(6))};
    return {false, "malformed reply " + quoted(bytes)};
}

} // namespace cmd::pesto
