#include "pools/label_selector.h"

#include <algorithm>

namespace shmipam::pools {

using nlohmann::json;
using Op = LabelRequirement::Op;

bool matches(const LabelSelector& selector, const Labels& labels) {
    for (const auto& [k, v] : selector.match_labels) {
        auto it = labels.find(k);
        if (it == labels.end() || it->second != v) return false;
    }
    for (const auto& r : selector.expressions) {
        auto it = labels.find(r.key);
        const bool present = it != labels.end();
        const bool listed =
            present && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
        switch (r.op) {
            case Op::kIn:
                if (!listed) return false;
                break;
            case Op::kNotIn:
                if (listed) return false;
                break;
            case Op::kExists:
                if (!present) return false;
                break;
            case Op::kDoesNotExist:
                if (present) return false;
                break;
        }
    }
    return true;
}

namespace {

Error bad(const std::string& where, const std::string& what) {
    return Error{Code::kInvalidConfig, where + ": " + what, ""};
}

}  // namespace

Expected<LabelSelector> decode_selector(const json& j, const std::string& where) {
    if (!j.is_object()) return bad(where, "a label selector must be an object");
    LabelSelector s;
    if (auto ml = j.find("matchLabels"); ml != j.end() && !ml->is_null()) {
        if (!ml->is_object()) return bad(where, "matchLabels must be an object of strings");
        for (const auto& [k, v] : ml->items()) {
            if (!v.is_string()) return bad(where, "matchLabels." + k + " must be a string");
            s.match_labels[k] = v.get<std::string>();
        }
    }
    if (auto me = j.find("matchExpressions"); me != j.end() && !me->is_null()) {
        if (!me->is_array()) return bad(where, "matchExpressions must be a list");
        for (const auto& e : *me) {
            if (!e.is_object() || !e.contains("key") || !e["key"].is_string() ||
                !e.contains("operator") || !e["operator"].is_string()) {
                return bad(where, "each matchExpressions item needs a string key and operator");
            }
            LabelRequirement r;
            r.key = e["key"].get<std::string>();
            const std::string op = e["operator"].get<std::string>();
            if (op == "In")
                r.op = Op::kIn;
            else if (op == "NotIn")
                r.op = Op::kNotIn;
            else if (op == "Exists")
                r.op = Op::kExists;
            else if (op == "DoesNotExist")
                r.op = Op::kDoesNotExist;
            else
                return bad(where, "\"" + op + "\" is not a valid label selector operator");
            if (auto vs = e.find("values"); vs != e.end() && !vs->is_null()) {
                if (!vs->is_array()) return bad(where, "values must be a list of strings");
                for (const auto& v : *vs) {
                    if (!v.is_string()) return bad(where, "values must be a list of strings");
                    r.values.push_back(v.get<std::string>());
                }
            }
            const bool wants_values = r.op == Op::kIn || r.op == Op::kNotIn;
            if (wants_values && r.values.empty()) {
                return bad(where, "for 'in', 'notin' operators, values set can't be empty");
            }
            if (!wants_values && !r.values.empty()) {
                return bad(where, "values set must be empty for 'exists' and 'doesnotexist'");
            }
            s.expressions.push_back(std::move(r));
        }
    }
    return s;
}

std::string to_string(const LabelSelector& selector) {
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : ",") + s; };
    for (const auto& [k, v] : selector.match_labels) add(k + "=" + v);
    for (const auto& r : selector.expressions) {
        std::string vals;
        for (const auto& v : r.values) vals += (vals.empty() ? "" : ",") + v;
        switch (r.op) {
            case Op::kIn:
                add(r.key + " in (" + vals + ")");
                break;
            case Op::kNotIn:
                add(r.key + " notin (" + vals + ")");
                break;
            case Op::kExists:
                add(r.key);
                break;
            case Op::kDoesNotExist:
                add("!" + r.key);
                break;
        }
    }
    return out.empty() ? "<everything>" : out;
}

}  // namespace shmipam::pools
