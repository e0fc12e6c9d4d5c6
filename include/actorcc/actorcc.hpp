// Umbrella header.
#pragma once
#include "actorcc/communicator.hpp"
#include "actorcc/error.hpp"
#include "actorcc/options.hpp"
#include "actorcc/types.hpp"
#include "actorcc/unique_id.hpp"
