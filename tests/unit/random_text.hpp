// SPDX-License-Identifier: Apache-2.0

// Random texts over an alphabet, for the framing tests that check a
// verdict against whatever may follow (test_s4n_api, test_pesto_protocol).
#pragma once

#include <cstddef>
#include <random>
#include <string>

// Fewer than max bytes, each drawn from alphabet.
inline std::string random_text(std::mt19937 &rnd, const std::string &alphabet,
                               std::size_t max) {
    std::string s;
    std::size_t n = rnd() % max;
    for (std::size_t i = 0; i < n; i++) s += alphabet[rnd() % alphabet.size()];
    return s;
}
