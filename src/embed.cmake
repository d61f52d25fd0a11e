# Turns Lua scripts into a C header of string constants, so the scripts stay
# readable .lua files (try them in redis-cli) and are built into rankd.
# Usage: cmake -DOUT=header.h -DIN="a.lua|b.lua" -P embed.cmake
string(REPLACE "|" ";" IN "${IN}")
file(WRITE ${OUT}.tmp "/* Generated from the .lua files of src/lua by src/embed.cmake. Do not edit. */\n")
foreach(path ${IN})
  get_filename_component(name ${path} NAME_WE)
  file(READ ${path} text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n\"" text "${text}")
  file(APPEND ${OUT}.tmp "static const char rank_lua_${name}[] =\n\"${text}\";\n")
endforeach()
file(RENAME ${OUT}.tmp ${OUT})
