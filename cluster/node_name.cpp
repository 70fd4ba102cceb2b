#include "cluster/node_name.h"

namespace shmipam::cluster {

namespace {

// RFC 1123: a subdomain is at most 253 characters, each label at most 63.
constexpr size_t kMaxNameBytes = 253;
constexpr size_t kMaxLabelBytes = 63;

bool alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool is_label(std::string_view l) {
    if (l.empty() || l.size() > kMaxLabelBytes || !alnum(l.front()) || !alnum(l.back())) {
        return false;
    }
    for (char c : l) {
        if (!alnum(c) && c != '-') return false;
    }
    return true;
}

}  // namespace

bool is_node_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxNameBytes) return false;
    for (size_t start = 0;;) {
        const size_t dot = name.find('.', start);
        if (!is_label(name.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
            return false;
        }
        if (dot == std::string_view::npos) return true;
        start = dot + 1;
    }
}

std::string node_name_problem(std::string_view name) {
    if (is_node_name(name)) return "";
    return "\"" + std::string(name) +
           "\" is not a Kubernetes node name: a node name is an RFC 1123 subdomain of at most "
           "253 characters, lower-case letters, digits, '-' and '.', each dot-separated part "
           "starting and ending with a lower-case letter or digit (the Node object's "
           "metadata.name, as `kubectl get nodes` shows it)";
}

}  // namespace shmipam::cluster
