// The `strata` executable: everything is in StrataCommands, so that tests can run the same code.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import StrataCommands
import StrataCore

exit(await StrataCLI.run(arguments: Array(CommandLine.arguments.dropFirst())))
