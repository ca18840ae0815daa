//! The `detail` Lambda function. A placeholder until the functions land: it exits with an
//! error so that nothing deploys it by mistake.

fn main() {
    eprintln!("lawsync-detail: not implemented yet; the function arrives with the Lambda functions work");
    std::process::exit(2);
}
