// The SVG map of shmipamctl render (svg.h): cells coloured by state, a hover title each.
#include "tools/render/svg.h"

#include <map>

namespace shmipam::tools {

namespace {

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

const char* colour(const std::string& state) {
    if (state == "allocated") return "#2b6cb0";
    if (state == "cooling") return "#90cdf4";
    if (state == "claiming" || state == "releasing") return "#dd6b20";
    if (state == "reserved" || state == "sticky") return "#6b46c1";
    return "#e2e8f0";  // free
}

}  // namespace

std::string render_svg(const engine::NetworkDump& d) {
    constexpr int kCell = 10, kCols = 16, kGap = 14, kTop = 40;
    uint64_t total = 0;
    for (const auto& b : d.blocks) total += b.slots;
    const bool per_address = total <= kMaxCellsPerAddress;
    std::map<std::string, std::vector<const engine::SlotView*>> slots_of;
    for (const auto& s : d.slots) slots_of[s.block].push_back(&s);

    std::string body;
    int width = 0, height = 0;
    if (per_address) {
        // Blocks side by side (up to 8 a row), each a grid of kCols columns.
        int bx = 0, by = kTop, row_h = 0, col = 0;
        for (const auto& b : d.blocks) {
            const int rows = int((b.slots + kCols - 1) / kCols);
            const int bw = kCols * kCell, bh = rows * kCell;
            body += "<g transform=\"translate(" + std::to_string(bx) + "," + std::to_string(by) +
                    ")\"><text x=\"0\" y=\"-4\" font-size=\"10\">" + xml_escape(b.cidr) +
                    "</text>\n";
            std::map<uint64_t, const engine::SlotView*> used;
            const auto base = engine::Cidr::parse(b.cidr);
            for (const auto* s : slots_of[b.cidr])
                used[uint64_t(s->address.value - base->address.value)] = s;
            for (uint64_t i = 0; i < b.slots; ++i) {
                const auto it = used.find(i);
                const std::string state = it == used.end() ? "free" : it->second->state;
                engine::IpAddress a{base->address.value + i, base->address.family};
                std::string title = a.to_string() + " " + state;
                if (it != used.end() && !it->second->container_id.empty()) {
                    title += " " + it->second->container_id + "/" + it->second->ifname;
                    if (!it->second->pod.empty()) title += " pod " + it->second->pod;
                }
                body += "<rect class=\"cell\" x=\"" + std::to_string(int(i % kCols) * kCell) +
                        "\" y=\"" + std::to_string(int(i / kCols) * kCell) + "\" width=\"" +
                        std::to_string(kCell - 1) + "\" height=\"" + std::to_string(kCell - 1) +
                        "\" fill=\"" + colour(state) + "\"><title>" + xml_escape(title) +
                        "</title></rect>\n";
            }
            body += "</g>\n";
            width = std::max(width, bx + bw);
            row_h = std::max(row_h, bh);
            height = std::max(height, by + bh);
            if (++col == 8) {
                col = 0;
                bx = 0;
                by += row_h + kGap + 10;
                row_h = 0;
            } else {
                bx += bw + kGap;
            }
        }
    } else {
        // One cell per block, its shade by how much of it is in use.
        int i = 0;
        for (const auto& b : d.blocks) {
            const double used = b.slots ? double(b.in_use) / double(b.slots) : 0;
            const int shade = 230 - int(used * 200);
            char fill[16];
            std::snprintf(fill, sizeof fill, "#%02x%02x%02x", shade / 3, shade / 2 + 40, 230);
            const std::string title = b.cidr + ": " + std::to_string(b.in_use) + " in use, " +
                                      std::to_string(b.cooling) + " cooling of " +
                                      std::to_string(b.slots);
            body += "<rect class=\"cell\" x=\"" + std::to_string((i % 32) * kCell) + "\" y=\"" +
                    std::to_string(kTop + (i / 32) * kCell) +
                    "\" width=\"9\" height=\"9\" fill=\"" + fill + "\"><title>" +
                    xml_escape(title) + "</title></rect>\n";
            ++i;
        }
        width = 32 * kCell;
        height = kTop + ((i + 31) / 32) * kCell;
    }
    // Legend.
    std::string legend;
    int lx = 0;
    for (const char* st : {"free", "allocated", "cooling", "claiming", "reserved"}) {
        legend += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(height + 12) +
                  "\" width=\"9\" height=\"9\" fill=\"" + colour(st) + "\"/><text x=\"" +
                  std::to_string(lx + 12) + "\" y=\"" + std::to_string(height + 20) +
                  "\" font-size=\"10\">" + st + "</text>\n";
        lx += 80;
    }
    width = std::max(width, lx);
    height += 30;
    std::string head =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
        "width=\"" +
        std::to_string(width + 20) + "\" height=\"" + std::to_string(height + 10) +
        "\" font-family=\"sans-serif\">\n<g transform=\"translate(10,0)\">\n<text x=\"0\" y=\"16\" "
        "font-size=\"13\">" +
        xml_escape("network " + d.network +
                   (per_address ? ": one cell per address" : ": one cell per block")) +
        "</text>\n";
    return head + body + legend + "</g>\n</svg>\n";
}

}  // namespace shmipam::tools
