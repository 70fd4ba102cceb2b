// shmipam: the CNI IPAM plugin binary. Reads the environment and stdin, prints the result or
// error JSON on stdout, logs to stderr, exits (plugin/process.h).
#include "plugin/process.h"

int main() {
    shmipam::cni::serve_invocation();
}
