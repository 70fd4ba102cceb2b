#include "kube/base64.h"

#include <cstdint>

namespace shmipam::kube {

namespace {

int value_of(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

std::optional<std::string> base64_decode_strict(std::string_view text) {
    std::string clean;
    clean.reserve(text.size());
    for (char c : text) {
        if (c != '\r' && c != '\n') clean += c;
    }
    if (clean.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(clean.size() / 4 * 3);
    for (size_t i = 0; i < clean.size(); i += 4) {
        const bool last = i + 4 == clean.size();
        // "xx==" or "xxx=" only in the last quantum.
        const size_t pad = clean[i + 3] != '=' ? 0 : clean[i + 2] == '=' ? 2 : 1;
        if (pad > 0 && !last) return std::nullopt;
        uint32_t v = 0;
        for (size_t k = 0; k < 4; ++k) {
            const int d = k < 4 - pad ? value_of(clean[i + k]) : 0;
            if (d < 0) return std::nullopt;
            v = (v << 6) | uint32_t(d);
        }
        out += char((v >> 16) & 0xff);
        if (pad < 2) out += char((v >> 8) & 0xff);
        if (pad < 1) out += char(v & 0xff);
    }
    return out;
}

}  // namespace shmipam::kube
