#include "base/yaml_json.h"

#include <yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace shmipam::base {

using nlohmann::json;

namespace {

// 1000000 -> "1,000,000": bounds read as people write them.
std::string with_thousands(size_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

json scalar_to_json(const yaml_node_t& n) {
    const std::string s(reinterpret_cast<const char*>(n.data.scalar.value), n.data.scalar.length);
    if (n.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return s;
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+') {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (errno == 0 && end != nullptr && *end == '\0') return v;
    }
    return s;
}

// Alias uses in a loaded document: the loader resolves each alias to a reference to the anchored
// node, so every reference beyond the one each non-root node has in a tree is an alias.
size_t alias_uses(yaml_document_t& doc) {
    size_t refs = 0;
    const size_t nodes = size_t(doc.nodes.top - doc.nodes.start);
    for (yaml_node_t* n = doc.nodes.start; n < doc.nodes.top; ++n) {
        if (n->type == YAML_SEQUENCE_NODE) {
            refs += size_t(n->data.sequence.items.top - n->data.sequence.items.start);
        }
        if (n->type == YAML_MAPPING_NODE) {
            refs += 2 * size_t(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
        }
    }
    return nodes == 0 || refs < nodes - 1 ? 0 : refs - (nodes - 1);
}

// One conversion, within the bounds: a node past one is not followed, `over` says which.
struct Converter {
    yaml_document_t& doc;
    const YamlBounds& bounds;
    size_t nodes = 0;
    std::string over;

    json node(int index, int depth) {
        if (!over.empty()) return nullptr;
        if (depth > bounds.max_depth) {
            over = "nests deeper than " + std::to_string(bounds.max_depth) +
                   " levels (the bound for " + bounds.of + ")";
            return nullptr;
        }
        if (++nodes > bounds.max_nodes) {
            over = "expands to more than " + with_thousands(bounds.max_nodes) +
                   " YAML nodes (the bound for " + bounds.of + ")";
            return nullptr;
        }
        yaml_node_t* n = yaml_document_get_node(&doc, index);
        if (n == nullptr) return nullptr;
        switch (n->type) {
            case YAML_SCALAR_NODE:
                return scalar_to_json(*n);
            case YAML_SEQUENCE_NODE: {
                json a = json::array();
                for (yaml_node_item_t* i = n->data.sequence.items.start;
                     i < n->data.sequence.items.top; ++i) {
                    a.push_back(node(*i, depth + 1));
                }
                return a;
            }
            case YAML_MAPPING_NODE: {
                json o = json::object();
                for (yaml_node_pair_t* p = n->data.mapping.pairs.start;
                     p < n->data.mapping.pairs.top; ++p) {
                    json key = node(p->key, depth + 1);
                    o[key.is_string() ? key.get<std::string>() : key.dump()] =
                        node(p->value, depth + 1);
                }
                return o;
            }
            case YAML_NO_NODE:
                break;
        }
        return nullptr;
    }
};

}  // namespace

YamlDocuments yaml_to_json(std::string_view text, const YamlBounds& bounds) {
    YamlDocuments out;
    yaml_parser_t parser;
    if (yaml_parser_initialize(&parser) == 0) {
        out.problem = "cannot be read: out of memory reading YAML";
        return out;
    }
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    while (out.documents.size() < bounds.max_documents) {
        yaml_document_t doc;
        if (yaml_parser_load(&parser, &doc) == 0) {
            out.problem = std::string("is not valid YAML: ") +
                          (parser.problem != nullptr ? parser.problem : "parse error") +
                          " at line " + std::to_string(parser.problem_mark.line + 1);
            break;
        }
        // The stream's end: a document without a root node (an empty text gives only that).
        const bool end = yaml_document_get_root_node(&doc) == nullptr;
        if (end) {
            if (out.documents.empty()) out.documents.emplace_back(nullptr);
            yaml_document_delete(&doc);
            break;
        }
        if (alias_uses(doc) > bounds.max_aliases) {
            out.problem = "uses more than " + std::to_string(bounds.max_aliases) +
                          " YAML aliases (the bound for " + bounds.of + ")";
        } else {
            Converter c{doc, bounds};
            json converted = c.node(1, 0);
            out.problem = c.over;
            if (out.problem.empty()) out.documents.push_back(std::move(converted));
        }
        yaml_document_delete(&doc);
        if (!out.problem.empty()) break;
    }
    yaml_parser_delete(&parser);
    return out;
}

}  // namespace shmipam::base
