#include "kube/names.h"

namespace shmipam::kube {

namespace {

bool alphanumeric(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// The label rule without its length bound: a-z 0-9 '-', alphanumeric at both ends.
bool label_characters(const std::string& s) {
    if (s.empty() || !alphanumeric(s.front()) || !alphanumeric(s.back())) return false;
    for (char c : s) {
        if (!alphanumeric(c) && c != '-') return false;
    }
    return true;
}

constexpr const char* kLabelRule =
    "must consist of lower case alphanumeric characters or '-', and must start and end with an "
    "alphanumeric character";
constexpr const char* kSubdomainRule =
    "must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
    "with an alphanumeric character";

}  // namespace

std::optional<std::string> not_a_dns_label(const std::string& name) {
    if (name.size() > kMaxLabelBytes) {
        return "must be no more than " + std::to_string(kMaxLabelBytes) + " characters";
    }
    if (!label_characters(name)) return std::string("a lowercase RFC 1123 label ") + kLabelRule;
    return std::nullopt;
}

std::optional<std::string> not_a_dns_subdomain(const std::string& name) {
    if (name.size() > kMaxSubdomainBytes) {
        return "must be no more than " + std::to_string(kMaxSubdomainBytes) + " characters";
    }
    size_t start = 0;
    for (;;) {
        const size_t dot = name.find('.', start);
        if (!label_characters(name.substr(start, dot - start))) {
            return std::string("a lowercase RFC 1123 subdomain ") + kSubdomainRule;
        }
        if (dot == std::string::npos) return std::nullopt;
        start = dot + 1;
    }
}

}  // namespace shmipam::kube
