// The server and everything it needs are behind the package trait `Server`, so that an app
// depending on Strata resolves none of their packages. This repository's own commands enable it.
#if !Server
#error("StrataServer needs the package trait Server: build with `--traits Server` (see README.md)")
#endif
