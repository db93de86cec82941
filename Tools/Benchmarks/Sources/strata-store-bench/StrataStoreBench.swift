import Strata
@main struct StrataStoreBench { static func main() async { print(Schema.empty) } }
