// SPDX-License-Identifier: Apache-2.0

// The public header must compile as C++ with -Wall -Wextra -pedantic -Werror.
#include "rknp.h"

int main() {
    static_assert(sizeof(rknp_kv) == 2 * sizeof(void *));
    return rknp_get_api(RKNP_ABI_MAJOR) != nullptr ? 0 : 1;
}
