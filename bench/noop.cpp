// The floor of an exec-level measurement: a static binary that exits at once (built with the
// same toolchain and linking as the plugin's release build).
int main() {
    return 0;
}
